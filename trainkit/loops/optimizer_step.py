"""One training step's backward and optimizer step under automatic optimization: the hooks,
precision scaling, the strategy's own backward/step, gradient clipping and per-step schedulers."""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from trainkit.distributed import rank_board
from trainkit.loops.fit import bound_hooks

if TYPE_CHECKING:
    from trainkit.trainer.trainer import Trainer


class OptimizerStep:
    """Built once per fit, after the optimizers: everything a step needs, looked up once."""

    def __init__(self, trainer: Trainer) -> None:
        self.trainer = trainer
        self._before_backward = bound_hooks(trainer, "on_before_backward")
        self._after_backward = bound_hooks(trainer, "on_after_backward")
        self._before_optimizer_step = bound_hooks(trainer, "on_before_optimizer_step")
        self._before_zero_grad = bound_hooks(trainer, "on_before_zero_grad")
        self._step_schedulers = [c for c in trainer.lr_scheduler_configs if c.interval == "step"]
        self._clip = trainer.gradient_clip_val is not None and trainer.gradient_clip_val > 0
        self._params = [p for p in trainer.lightning_module.parameters() if p.requires_grad]
        strategy = trainer.strategy
        self._sync_gradients = strategy.gradient_sync_fn()
        self._set_to_none = strategy.zero_grad_set_to_none
        self._strategy_backward = strategy.backward_fn()
        self._strategy_step = strategy.optimizer_step_fn()
        self._mark = trainer._board.mark

    def backward(self, loss: torch.Tensor) -> None:
        self._mark(rank_board.BACKWARD)
        for hook in self._before_backward:
            hook(loss)
        if self._strategy_backward is not None:
            self._strategy_backward(loss)
        else:
            self.trainer.precision_plugin.backward(loss)
        for hook in self._after_backward:
            hook()

    def step(self) -> None:
        """Sync, unscale, clip, step and zero the (single) optimizer; step per-step schedulers."""
        self._mark(rank_board.OPTIMIZER_STEP)
        trainer = self.trainer
        optimizer = trainer.optimizers[0]
        precision = trainer.precision_plugin
        if self._sync_gradients is not None:
            self._sync_gradients(self._params)
        if self._clip or self._before_optimizer_step:
            precision.unscale(optimizer)
        for hook in self._before_optimizer_step:
            hook(optimizer)
        if self._clip:
            if trainer.gradient_clip_algorithm == "norm":
                torch.nn.utils.clip_grad_norm_(self._params, trainer.gradient_clip_val)
            else:
                torch.nn.utils.clip_grad_value_(self._params, trainer.gradient_clip_val)
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
            if (trainer.global_step + 1) % config.frequency == 0:
                config.scheduler.step()
