"""One training step's backward and optimizer step under automatic optimization: the hooks,
precision scaling, the strategy's own backward/step, gradient clipping and per-step schedulers."""

from __future__ import annotations

import torch

from trainkit.distributed import rank_board
from trainkit.loops.state import RunState


class OptimizerStep:
    """Built once per fit, after the optimizers: everything a step needs, looked up once."""

    def __init__(self, state: RunState) -> None:
        self.state = state
        hooks = state.hooks
        self._before_backward = hooks.bound("on_before_backward")
        self._after_backward = hooks.bound("on_after_backward")
        self._before_optimizer_step = hooks.bound("on_before_optimizer_step")
        self._before_zero_grad = hooks.bound("on_before_zero_grad")
        self._step_schedulers = [c for c in state.lr_scheduler_configs if c.interval == "step"]
        self._clip_value = state.limits.gradient_clip_val
        self._clip = self._clip_value is not None and self._clip_value > 0
        self._clip_by_norm = state.limits.gradient_clip_algorithm == "norm"
        self._params = [p for p in state.module.parameters() if p.requires_grad]
        strategy = state.strategy
        self._sync_gradients = strategy.gradient_sync_fn()
        self._set_to_none = strategy.zero_grad_set_to_none
        self._strategy_backward = strategy.backward_fn()
        self._strategy_step = strategy.optimizer_step_fn()
        self._mark = state.board.mark

    def backward(self, loss: torch.Tensor) -> None:
        self._mark(rank_board.BACKWARD)
        for hook in self._before_backward:
            hook(loss)
        if self._strategy_backward is not None:
            self._strategy_backward(loss)
        else:
            self.state.precision.backward(loss)
        for hook in self._after_backward:
            hook()

    def step(self) -> None:
        """Sync, unscale, clip, step and zero the (single) optimizer; step per-step schedulers."""
        self._mark(rank_board.OPTIMIZER_STEP)
        state = self.state
        optimizer = state.optimizers[0]
        precision = state.precision
        if self._sync_gradients is not None:
            self._sync_gradients(self._params)
        if self._clip or self._before_optimizer_step:
            precision.unscale(optimizer)
        for hook in self._before_optimizer_step:
            hook(optimizer)
        if self._clip:
            if self._clip_by_norm:
                torch.nn.utils.clip_grad_norm_(self._params, self._clip_value)
            else:
                torch.nn.utils.clip_grad_value_(self._params, self._clip_value)
        if self._strategy_step is not None:
            for hook in self._before_zero_grad:
                hook(optimizer)
            self._strategy_step()
        else:
            precision.step(optimizer)
            precision.update()
            for hook in self._before_zero_grad:
                hook(optimizer)
            optimizer.zero_grad(set_to_none=self._set_to_none)
        for config in self._step_schedulers:
            if (state.position.global_step + 1) % config.frequency == 0:
                config.scheduler.step()
