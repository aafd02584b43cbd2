"""Start one process per local rank with the same command, watch them, tear all down on failure.

The launching process is a pure watcher: it trains nothing itself, so a crashed rank 0 is seen
and reported like any other rank.
"""

from __future__ import annotations

import dataclasses
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn, Protocol

from trainkit.distributed.environments import NodePlacement
from trainkit.distributed.launchers.hydra import hydra_rank_command
from trainkit.distributed.launchers.job_nodes import JobNodes, NodeGaveUp
from trainkit.distributed.launchers.rank_command import RANK_COMMAND
from trainkit.distributed.launchers.rank_group import RankGroup, build_rank_command, stop_grace
from trainkit.distributed.ports import check_port_free, find_free_port
from trainkit.distributed.rank_env import World
from trainkit.distributed.restarts import Restarts
from trainkit.distributed.signals import PREEMPTED_EXIT_CODE, held_stop_signal

__all__ = ["RankGroup", "ReexecLauncher", "build_rank_command", "can_reexecute", "launch_ranks"]

PORT_RETRIES = 3


def current_command() -> list[str]:
    """The argv that re-runs this process: ``python script.py ...`` or ``python -m pkg ...``
    (or the command ``ranks_run`` set)."""
    given = RANK_COMMAND.get()
    if given is not None:
        return list(given)
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is not None and spec.name and spec.name != "__main__":
        module = spec.name.removesuffix(".__main__")
        return [sys.executable, "-m", module, *sys.argv[1:]]
    script = sys.argv[0] if sys.argv else ""
    if script and script not in ("-c", "-") and Path(script).is_file():
        return [sys.executable, script, *sys.argv[1:]]
    raise RuntimeError(
        "this Python session cannot be re-executed per rank (interactive or `python -c`); "
        "use strategy='ddp_spawn', or run a script file"
    )


def can_reexecute() -> bool:
    """Whether this process was started from a file or module that children can run again."""
    try:
        current_command()
    except RuntimeError:
        return False
    return True


class RankCounts(Protocol):
    """What the launcher reads of the strategy it starts ranks for (``Strategy``'s members)."""

    @property
    def processes_per_node(self) -> int: ...
    @property
    def num_nodes(self) -> int: ...


class ReexecLauncher:
    """Re-runs this process's command once per local rank and watches them. The launching
    process is a pure watcher: ``launch`` never returns, it exits with the job's code (``fn``
    runs in the ranks, which reach the same call with their ranks set and launch nothing).
    A failed job starts again, every rank from the newest checkpoint, up to ``max_restarts``
    times."""

    def __init__(self, strategy: RankCounts, node: NodePlacement, max_restarts: int = 0) -> None:
        self.strategy = strategy
        self.node = node  # checked when the strategy chose this launcher
        self.max_restarts = max_restarts

    def launch(self, fn: Callable[..., Any] | None = None, *args: object) -> NoReturn:
        """Never returns: this process only watches the ranks it starts and ends with the
        job's exit code; ``fn`` runs in the re-executed ranks when they reach the same call."""
        raise SystemExit(launch_ranks(self.strategy, self.node, self.max_restarts))


def launch_ranks(strategy: RankCounts, node: NodePlacement, max_restarts: int = 0) -> int:
    """Run every local rank of this node (again after a failure, while restarts are left);
    return the job's exit code. On several nodes, the node launchers work together
    (``JobNodes``): MASTER_PORT is node 0's launcher, rank 0's store gets a port of its own."""
    node_rank, address, env_port = node
    world = World(
        local_world_size=strategy.processes_per_node,
        num_nodes=strategy.num_nodes,
        node_rank=node_rank,
        main_address=address,
        main_port=int(env_port) if env_port else find_free_port(),
    )
    argv = hydra_rank_command() or current_command()  # a Hydra app's ranks share its run folder
    stop_grace()  # a bad value fails here, before any rank starts
    nodes = JobNodes(world, world.main_port) if world.num_nodes > 1 else None
    if env_port and world.node_rank == 0 and nodes is None:
        check_port_free(world.main_address, world.main_port)
    try:
        return run_attempts(world, argv, bool(env_port) and nodes is None, max_restarts, nodes)
    except NodeGaveUp as gave_up:
        return gave_up.code
    finally:
        if nodes is not None:
            nodes.close()


def run_attempts(
    world: World, argv: list[str], port_fixed: bool, max_restarts: int, nodes: JobNodes | None
) -> int:
    """Start the ranks, again after a failure while restarts are left; the job's exit code."""
    restarts = Restarts(max_restarts)
    while True:
        held = held_stop_signal()
        if held is not None:
            print(
                f"trainkit: {signal.Signals(held).name} arrived before the ranks started; "
                "stopped before training (nothing to save); run the same command to start again",
                file=sys.stderr,
                flush=True,
            )
            return PREEMPTED_EXIT_CODE
        code, group = run_attempt(world, argv, port_fixed, restarts.count, nodes)
        if nodes is not None:
            nodes.linger()
        if not restarts.should_restart(code, group.stopped_by_signal, group.cause):
            return code
        if not port_fixed:
            world = dataclasses.replace(world, main_port=find_free_port())


def run_attempt(
    world: World, argv: list[str], port_fixed: bool, restart: int, nodes: JobNodes | None = None
) -> tuple[int, RankGroup]:
    """One start of every local rank, again on a fresh port when rank 0 found its port taken
    (on several nodes, node 0's launcher picks it and the others ask it)."""
    for _attempt in range(PORT_RETRIES):
        if nodes is not None:
            world = dataclasses.replace(world, main_port=nodes.begin_attempt())
        group = RankGroup(world, argv, restart, nodes)
        code, port_clash = group.run()
        if not port_clash or port_fixed:
            break
        world = dataclasses.replace(world, main_port=find_free_port())
    return code, group
