"""StepForwarder: the module as a wrapper (DDP, FSDP, an engine) sees it, with the step as forward."""

from __future__ import annotations

from typing import Any

from torch import nn


class StepForwarder(nn.Module):
    """Routes the wrapper's forward to ``training_step`` (or the named step), so the wrapper
    sees the step and does its work around it (DDP syncs gradients, FSDP gathers parameters)."""

    def __init__(self, module: nn.Module) -> None:
        super().__init__()
        self.module = module

    def forward(self, *args: object, step: str = "training_step") -> Any:
        return getattr(self.module, step)(*args)
