"""How long and how often a run goes: the Trainer's loop settings, checked and frozen."""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class LoopLimits:
    """How long and how often: the loop settings of the Trainer, checked and frozen."""

    max_epochs: int | float = 1000
    min_epochs: int = 0
    max_steps: int = -1
    min_steps: int = -1
    limit_train_batches: int | float = 1.0
    limit_val_batches: int | float = 1.0
    limit_test_batches: int | float = 1.0
    limit_predict_batches: int | float = 1.0
    val_check_interval: int | float = 1.0
    check_val_every_n_epoch: int | None = 1  # None: val_check_interval counts across epochs
    num_sanity_val_steps: int = 2
    accumulate_grad_batches: int = 1
    gradient_clip_val: float | None = None
    gradient_clip_algorithm: str = "norm"
    log_every_n_steps: int = 50
    overfit_batches: int | float = 0
    reload_dataloaders_every_n_epochs: int = 0

    def limit_for(self, stage: str) -> int | float:
        """The batch limit of a loop stage: train, validation/val, test or predict."""
        key = {"validation": "val", "validate": "val"}.get(stage, stage)
        return getattr(self, f"limit_{key}_batches")

    def steps_per_epoch(self, batches: int | float) -> int | float:
        """Optimizer steps an epoch of ``batches`` training batches takes."""
        if batches == math.inf:
            return math.inf
        return math.ceil(batches / self.accumulate_grad_batches)

    def total_steps(self, batches_per_epoch: int | float) -> int | float:
        """Optimizer steps a whole fit takes (max_epochs and max_steps applied)."""
        per_epoch = self.steps_per_epoch(batches_per_epoch)
        total = per_epoch * self.max_epochs if self.max_epochs != math.inf else math.inf
        return min(total, self.max_steps) if self.max_steps >= 0 else total
