"""TrainModule's members beyond the steps: how it enters evaluation, and the optimizer helpers
of manual optimization (toggling, clipping) with Lightning's names."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import torch
from torch import nn


class ModeHooks:
    """How a module enters and leaves evaluation (override to keep, e.g., dropout on)."""

    def on_validation_model_eval(self) -> None:
        self.eval()

    def on_validation_model_train(self) -> None:
        self.train()

    def on_test_model_eval(self) -> None:
        self.eval()

    def on_test_model_train(self) -> None:
        self.train()

    def on_predict_model_eval(self) -> None:
        self.eval()

    def on_validation_model_zero_grad(self) -> None:
        """Before validation in fit: drop the gradients so evaluation has the memory."""
        self.zero_grad(set_to_none=True)


class TransferHooks:
    """How a batch reaches the module's device (override to move custom batch types)."""

    def on_before_batch_transfer(self, batch: Any, dataloader_idx: int) -> Any:
        return batch

    def transfer_batch_to_device(
        self, batch: Any, device: torch.device, dataloader_idx: int
    ) -> Any:
        from trainkit.strategies.base import move_to_device

        return move_to_device(batch, device)

    def on_after_batch_transfer(self, batch: Any, dataloader_idx: int) -> Any:
        return batch


class OptimizationMembers:
    """Mixed into TrainModule: per-optimizer gradient switches and gradient clipping."""

    _toggled: dict[nn.Parameter, bool]
    parameters: Any  # nn.Module's, later in TrainModule's bases

    def toggle_optimizer(self, optimizer: Any) -> None:
        """Only ``optimizer``'s parameters get gradients until ``untoggle_optimizer`` (GANs)."""
        own = {id(p) for group in _param_groups(optimizer) for p in group["params"]}
        for param in self.parameters():
            if param not in self._toggled:
                self._toggled[param] = param.requires_grad
            if id(param) not in own:
                param.requires_grad = False

    def untoggle_optimizer(self, optimizer: Any) -> None:
        """Give back the ``requires_grad`` every parameter had before ``toggle_optimizer``."""
        for param, required in self._toggled.items():
            param.requires_grad = required
        self._toggled = {}

    @contextmanager
    def toggled_optimizer(self, optimizer: Any) -> Iterator[None]:
        """``toggle_optimizer`` for the block, ``untoggle_optimizer`` after it."""
        self.toggle_optimizer(optimizer)
        try:
            yield
        finally:
            self.untoggle_optimizer(optimizer)

    def clip_gradients(
        self,
        optimizer: Any,
        gradient_clip_val: float | None = None,
        gradient_clip_algorithm: str | None = None,
    ) -> None:
        """Clip the gradients of ``optimizer``'s parameters by 'norm' (default) or 'value'."""
        if not gradient_clip_val:
            return
        params = [p for group in _param_groups(optimizer) for p in group["params"]]
        if gradient_clip_algorithm in (None, "norm"):
            torch.nn.utils.clip_grad_norm_(params, gradient_clip_val)
        elif gradient_clip_algorithm == "value":
            torch.nn.utils.clip_grad_value_(params, gradient_clip_val)
        else:
            from trainkit.errors import ConfigError

            raise ConfigError(
                "gradient_clip_algorithm", gradient_clip_algorithm, "'norm' or 'value'"
            )

    def configure_gradient_clipping(
        self,
        optimizer: Any,
        gradient_clip_val: float | None = None,
        gradient_clip_algorithm: str | None = None,
    ) -> None:
        """Called before every optimizer step with the Trainer's clipping settings; override
        to clip differently (call ``self.clip_gradients``)."""
        self.clip_gradients(optimizer, gradient_clip_val, gradient_clip_algorithm)


class OptimizationHooks:
    """Mixed into TrainModule: the steps of automatic optimization a module may override."""

    def backward(self, loss: torch.Tensor, *args: Any, **kwargs: Any) -> None:
        """Backpropagate ``loss`` (already scaled under 16-mixed); override for, e.g.,
        ``retain_graph``."""
        loss.backward(*args, **kwargs)

    def optimizer_step(
        self,
        epoch: int,
        batch_idx: int,
        optimizer: Any,
        optimizer_closure: Callable[[], Any] | None = None,
    ) -> None:
        """Step ``optimizer``; override for, e.g., learning-rate warm-up (keep the call
        ``optimizer.step(closure=optimizer_closure)``)."""
        optimizer.step(closure=optimizer_closure)

    def optimizer_zero_grad(self, epoch: int, batch_idx: int, optimizer: Any) -> None:
        """Clear the gradients after a step; override to keep or zero them differently."""
        optimizer.zero_grad()

    def lr_scheduler_step(self, scheduler: Any, metric: Any = None) -> None:
        """Step ``scheduler``; override for schedulers with another step signature (timm)."""
        if metric is None:
            scheduler.step()
        else:
            scheduler.step(metric)


def _param_groups(optimizer: Any) -> list[dict[str, Any]]:
    """The parameter groups of a torch optimizer, or of the optimizer a wrapper holds."""
    inner = getattr(optimizer, "optimizer", optimizer)
    return inner.param_groups
