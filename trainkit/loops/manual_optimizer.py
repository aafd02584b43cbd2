"""The optimizer a manually optimized module steps (what ``self.optimizers()`` returns): each
``step`` runs the closure, the ``on_before_optimizer_step`` hooks, the precision's step (the
fp16 scaler) and counts one global step, as Lightning counts every optimizer's step."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from trainkit.state import LoopPosition
from trainkit.strategies.precision import Precision


class ManualOptimizer:
    """Wraps one optimizer: ``step`` goes through the precision and counts the global step;
    everything else (``zero_grad``, ``param_groups``, ``state_dict``...) is the optimizer's."""

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        precision: Precision,
        position: LoopPosition,
        before_step: Sequence[Callable[[torch.optim.Optimizer], object]],
    ) -> None:
        self.optimizer = optimizer
        self._precision = precision
        self._position = position
        self._before_step = before_step

    def step(self, closure: Callable[[], Any] | None = None) -> Any:
        """Run ``closure`` (its forward and ``manual_backward``), then step; returns what the
        closure returned, or the optimizer's step result without one."""
        closure_result = closure() if closure is not None else None
        if self._before_step:
            self._precision.unscale(self.optimizer)
            for hook in self._before_step:
                hook(self.optimizer)
        result = self._precision.step(self.optimizer)
        self._precision.update()
        self._position.global_step += 1
        return closure_result if closure is not None else result

    def __getattr__(self, name: str) -> Any:
        if name == "optimizer":  # not set yet (a copy being built)
            raise AttributeError(name)
        return getattr(self.optimizer, name)

    def __repr__(self) -> str:
        return f"ManualOptimizer({self.optimizer!r})"
