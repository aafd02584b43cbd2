"""One training step's backward and optimizer step under automatic optimization: the hooks,
precision scaling, the strategy's own backward/step, gradient clipping and per-step schedulers."""

from __future__ import annotations

from typing import Any

import torch

from trainkit.callbacks.base import overrides
from trainkit.distributed import rank_board
from trainkit.loops.state import RunState
from trainkit.module import TrainModule


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
        module = state.module
        clip_value = state.limits.gradient_clip_val
        # the module's configure_gradient_clipping (by default clip_gradients with the Trainer's
        # settings) runs when the Trainer clips or the module overrides it
        self._clip = (clip_value is not None and clip_value > 0) or overrides(
            module, TrainModule, "configure_gradient_clipping"
        )
        self._clip_fn = module.configure_gradient_clipping
        self._scheduler_step = module.lr_scheduler_step
        self._params = [p for p in state.module.parameters() if p.requires_grad]
        strategy = state.strategy
        self._sync_gradients = strategy.gradient_sync_fn()
        self._set_to_none = strategy.zero_grad_set_to_none
        self._strategy_backward = strategy.backward_fn()
        manual = not state.module.automatic_optimization
        self._manual_sync = strategy.manual_gradient_sync_fn(state.wrapped, state.module)
        # the module's own versions of the steps, only where it overrides them
        self._user_backward = overridden(module, "backward")
        self._user_step = overridden(module, "optimizer_step")
        self._user_zero_grad = overridden(module, "optimizer_zero_grad")
        self._loss: torch.Tensor | None = None
        self._plain_backward = self._user_backward is None and self._user_step is None
        self._all_params = list(state.module.parameters()) if manual else []
        self._strategy_step = strategy.optimizer_step_fn()
        self._mark = state.board.mark

    def backward(self, loss: torch.Tensor) -> None:
        self._mark(rank_board.BACKWARD)
        for hook in self._before_backward:
            hook(loss)
        if self._strategy_backward is not None:
            self._strategy_backward(loss)
        elif self._plain_backward:
            self.state.precision.backward(loss)
        else:
            self._custom_backward(loss)
        if self._manual_sync is not None:
            self._manual_sync(self._all_params)
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
        if self._clip:  # the optimizer's parameters now (finetuning may have added groups)
            limits = state.limits
            self._clip_fn(optimizer, limits.gradient_clip_val, limits.gradient_clip_algorithm)
        if self._strategy_step is not None:
            for hook in self._before_zero_grad:
                hook(optimizer)
            self._strategy_step()
        else:
            if self._user_step is None:
                precision.step(optimizer)
                precision.update()
            else:
                stepping = PrecisionOptimizer(optimizer, precision)
                self._user_step(*self._where(), stepping, self._closure)
            for hook in self._before_zero_grad:
                hook(optimizer)
            if self._user_zero_grad is None:
                optimizer.zero_grad(set_to_none=self._set_to_none)
            else:
                self._user_zero_grad(*self._where(), optimizer)
        for config in self._step_schedulers:
            if (state.position.global_step + 1) % config.frequency == 0:
                self._scheduler_step(config.scheduler, None)

    def _custom_backward(self, loss: torch.Tensor) -> None:
        """Backward for a module that overrides ``backward`` or ``optimizer_step``."""
        self._loss = loss
        if self._user_backward is None:
            self.state.precision.backward(loss)
        else:
            self._user_backward(self.state.precision.scale(loss))

    def _where(self) -> tuple[int, int]:
        """(epoch, batch_idx) of the step, as a module's optimizer_step override receives."""
        position = self.state.position
        return position.epoch, position.batches_done

    def _closure(self) -> torch.Tensor | None:
        """The closure an optimizer_step override hands to optimizer.step: the step's forward
        and backward already ran, so it returns the loss."""
        return self._loss


def overridden(module: TrainModule, name: str) -> Any:
    """``module``'s method ``name`` if its class overrides TrainModule's, else None."""
    return getattr(module, name) if overrides(module, TrainModule, name) else None


class PrecisionOptimizer:
    """The optimizer an ``optimizer_step`` override steps: ``step`` goes through the precision
    plugin (the fp16 scaler); everything else is the optimizer's."""

    def __init__(self, optimizer: torch.optim.Optimizer, precision: Any) -> None:
        self.optimizer = optimizer
        self.precision = precision

    def step(self, closure: Any = None) -> Any:
        if closure is not None:
            closure()
        result = self.precision.step(self.optimizer)
        self.precision.update()
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self.optimizer, name)
