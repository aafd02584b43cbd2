"""What surrounds a fit when a scheduler may stop, restart or requeue it: stop signals held
from the start, the checkpoint a restarted job resumes from, a requeue after a preemption."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING

from trainkit.distributed.restarts import restart_checkpoint
from trainkit.distributed.signals import hold_stop_signals
from trainkit.distributed.slurm import (
    max_stalled_requeues,
    requeue_after_preemption,
    requeue_min_steps,
    requeue_signal,
)

if TYPE_CHECKING:
    from trainkit.trainer.trainer import Trainer


@contextlib.contextmanager
def fit_under_scheduler(trainer: Trainer, ckpt_path: str | None) -> Iterator[str | None]:
    """Around ``fit``: a stop signal before the loop watches is kept for its first safe point;
    a restarted job (max_restarts, torchrun, SLURM requeue) resumes from last.ckpt; after a
    preemption, rank 0 of a SLURM batch job requeues it. Yields the checkpoint to start from."""
    runs_here = trainer.strategy.cluster.creates_processes_externally or trainer.world_size <= 1
    if "SLURM_JOB_ID" in os.environ:
        requeue_signal()  # a bad TRAINKIT_REQUEUE_SIGNAL fails now, not after hours of training
        max_stalled_requeues()  # and bad requeue bounds
        requeue_min_steps()
    with hold_stop_signals():
        yield restart_checkpoint(
            ckpt_path, trainer.default_root_dir, trainer.is_global_zero and runs_here
        )
    if trainer.preempted:
        requeue_after_preemption(
            trainer.is_global_zero, trainer.preempted, trainer.stalled_attempts
        )
