"""The one place that chooses how a run's ranks start, from plain numbers: whether a launcher
outside trainkit started them, how many ranks the run has, ``max_restarts``, whether this
session can be re-run per rank, and the strategy's start method."""

from __future__ import annotations

import enum
import sys
from typing import TYPE_CHECKING

from trainkit.errors import ConfigError

if TYPE_CHECKING:
    from trainkit.distributed.launchers import Launcher
    from trainkit.strategies.base import Strategy

REEXEC_METHOD = "popen"  # Lightning's name for re-running the command per rank
START_METHODS = (REEXEC_METHOD, "spawn", "fork")


class Start(enum.Enum):
    HERE = "here"  # no launcher: the only rank, or one an external launcher started
    REEXEC = "reexec"  # re-run the command per local rank, and watch them (and restart)
    SPAWN = "spawn"  # start the ranks from this Python process with the strategy's method
    FORK_TWIN = "fork"  # an interactive session: fork the ranks of the strategy's spawn twin


def how_to_start(
    external: bool,
    world_size: int,
    max_restarts: int,
    reexecutable: bool,
    start_method: str,
    strategy_name: str,
) -> Start:
    """How the ranks start: none here under an external launcher; one rank runs here (watched by
    a re-run launcher only for ``max_restarts``); several re-run the command, unless the
    strategy spawns them, or the session cannot be re-run (forked). Restarts re-run the
    command: with ranks started any other way they are a one-line error."""
    if external:
        return Start.HERE
    if world_size <= 1:
        return Start.REEXEC if max_restarts and reexecutable else Start.HERE
    if start_method != REEXEC_METHOD:
        if max_restarts:
            raise ConfigError(
                "trainer.max_restarts",
                max_restarts,
                f"0 with strategy {strategy_name} (restarts re-run the command per rank)",
                "use strategy ddp from a script file or the trainkit command",
            )
        return Start.SPAWN
    if reexecutable:
        return Start.REEXEC
    if max_restarts:
        raise ConfigError(
            "trainer.max_restarts",
            max_restarts,
            f"0 with strategy {strategy_name} here (restarts re-run the command per rank)",
            "run it from a script file or the trainkit command",
        )
    return Start.FORK_TWIN


def choose_launcher(strategy: Strategy, max_restarts: int = 0) -> Launcher | None:
    """What starts ``strategy``'s ranks (None: this process is the rank). Under an external
    launcher ``max_restarts`` is said to be that launcher's business, on rank 0."""
    from trainkit.distributed.launchers.reexec import ReexecLauncher, can_reexecute
    from trainkit.distributed.launchers.spawn import SpawnLauncher
    from trainkit.distributed.restarts import say_restarts_are_the_launchers

    cluster = strategy.cluster
    if cluster.creates_processes_externally:
        say_restarts_are_the_launchers(cluster, max_restarts, strategy.is_global_zero)
    start = how_to_start(
        cluster.creates_processes_externally,
        strategy.world_size,
        max_restarts,
        can_reexecute(),
        strategy.start_method,
        strategy.name,
    )
    if start is Start.HERE:
        return None
    node = strategy.node_placement()
    if start is Start.REEXEC:
        return ReexecLauncher(strategy, node, max_restarts)
    if start is Start.SPAWN:
        return SpawnLauncher(strategy, strategy.start_method, node)
    twin = strategy.forked_twin()
    print(
        "trainkit: this Python session cannot be re-run per rank (interactive); starting the "
        f"{twin.world_size} ranks as forked processes ({twin.name}, start method fork)",
        file=sys.stderr,
        flush=True,
    )
    return SpawnLauncher(twin, "fork", node)
