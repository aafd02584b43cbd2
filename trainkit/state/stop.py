"""Why a fit stops or resumes: a callback's request, a stop signal, the checkpoint it continues."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class ResumePoint:
    """What a resumed fit restores once its loop starts: RNG states of every rank (at the
    checkpoint and at its epoch's start), the partial epoch's metrics, the batches to skip."""

    rng: list[dict[str, Any]]  # each rank's RNG states (seed.collect_rng_states)
    epoch_rng: list[dict[str, Any]]
    epoch_metrics: list[Any] | None = None
    skip: int = 0


@dataclass
class StopState:
    """Why a fit stops: a callback asked (``should_stop``), a stop signal preempted it (the
    signal's name), or nothing yet; and the resume point of a fit that continues a checkpoint."""

    should_stop: bool = False
    preempted: str | None = None
    resume: ResumePoint | None = None
    resumed_step: int | None = None  # the global step of the checkpoint this fit resumed
    stalled_attempts: int = 0  # earlier resumed attempts in a row that trained too few steps

    def stalled_now(self, global_step: int, min_steps: int) -> int:
        """Resumed attempts in a row that trained fewer than ``min_steps`` steps, this one
        counted if it did (a first attempt, which resumed nothing, never counts)."""
        if self.resumed_step is None or global_step - self.resumed_step >= min_steps:
            return 0
        return self.stalled_attempts + 1
