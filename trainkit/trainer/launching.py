"""Which launcher starts a job's ranks: re-executing the command, spawning, or none."""

from __future__ import annotations

import sys
from typing import Any

from trainkit.distributed.launchers import Launcher
from trainkit.distributed.launchers.reexec import ReexecLauncher, can_reexecute
from trainkit.distributed.launchers.spawn import SpawnLauncher
from trainkit.strategies import DDPSpawnStrategy, Strategy


def choose_launcher(strategy: Strategy) -> Launcher | None:
    """The launcher for ``strategy``, or None when this process is (or is the only) rank:
    under an external launcher (torchrun, SLURM, MPI) or with one rank in all."""
    if strategy.cluster.external or strategy.world_size <= 1:
        return None
    if strategy.launches_processes and can_reexecute():
        return ReexecLauncher(strategy)
    if strategy.launches_processes:
        return SpawnLauncher(forked_twin(strategy))
    return SpawnLauncher(strategy) if strategy.spawns_processes else None


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
