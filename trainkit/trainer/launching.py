"""Which launcher starts a job's ranks: re-executing the command, spawning, or none."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any

from trainkit.distributed.launchers import Launcher
from trainkit.distributed.launchers.reexec import ReexecLauncher, can_reexecute
from trainkit.distributed.launchers.spawn import SpawnLauncher
from trainkit.distributed.restarts import restart_checkpoint
from trainkit.distributed.signals import hold_stop_signals
from trainkit.distributed.slurm import requeue_after_preemption
from trainkit.errors import ConfigError
from trainkit.strategies import DDPSpawnStrategy, Strategy


def choose_launcher(strategy: Strategy, max_restarts: int = 0) -> Launcher | None:
    """The launcher for ``strategy``, or None when this process is (or is the only) rank:
    under an external launcher (torchrun, SLURM, MPI; restarts are theirs) or with one rank in
    all. ``max_restarts`` needs the re-executing launcher (also for a single rank)."""
    if strategy.cluster.external:
        return None
    if (
        max_restarts
        and can_reexecute()
        and (strategy.launches_processes or strategy.world_size <= 1)
    ):
        return ReexecLauncher(strategy, max_restarts)
    if strategy.world_size <= 1:
        return None
    if max_restarts:
        raise ConfigError(
            "trainer.max_restarts",
            max_restarts,
            f"0 with strategy {strategy.name} here (restarts re-run the command per rank)",
            "use strategy ddp from a script file or the trainkit command",
        )
    if strategy.launches_processes and can_reexecute():
        return ReexecLauncher(strategy)
    if strategy.launches_processes:
        return SpawnLauncher(forked_twin(strategy))
    return SpawnLauncher(strategy) if strategy.spawns_processes else None


@contextlib.contextmanager
def fit_under_scheduler(trainer: Any, ckpt_path: str | None) -> Iterator[str | None]:
    """Around ``fit``: a stop signal before the loop watches is kept for its first safe point;
    a restarted job (max_restarts, torchrun, SLURM requeue) resumes from last.ckpt; after a
    preemption, rank 0 of a SLURM batch job requeues it. Yields the checkpoint to start from."""
    runs_here = trainer.strategy.cluster.external or trainer.world_size <= 1
    with hold_stop_signals():
        yield restart_checkpoint(
            ckpt_path, trainer.default_root_dir, trainer.is_global_zero and runs_here
        )
    if trainer.preempted:
        requeue_after_preemption(trainer.is_global_zero)


def forked_twin(strategy: Any) -> DDPSpawnStrategy:
    """Interactive sessions (notebook, stdin, ``python -c``) cannot be re-executed: the same
    ddp settings with ranks forked from this process."""
    twin = DDPSpawnStrategy.forked(strategy.options)
    twin.connect(strategy.placement)
    print(
        "trainkit: this Python session cannot be re-run per rank (interactive); starting the "
        f"{twin.world_size} ranks as forked processes (ddp_spawn, start method fork)",
        file=sys.stderr,
        flush=True,
    )
    return twin
