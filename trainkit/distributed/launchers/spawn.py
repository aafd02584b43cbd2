"""Spawned ranks: start them from this Python process, run a callable in each, and bring rank
0's return value back (through a file, so it has no size limit).

What a spawned rank receives is pickled by plain :mod:`pickle`, not by torch.multiprocessing's
pickler: that one moves every tensor's storage into shared memory, so the ranks' parameters
would be one storage and each rank's optimizer step would land on all of them. A forked rank
gets its own copy-on-write memory as it is."""

from __future__ import annotations

import os
import pickle
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainkit.distributed.comm import set_rank
from trainkit.distributed.environments import NodePlacement, TrainkitLauncherEnvironment
from trainkit.distributed.ports import find_free_port
from trainkit.distributed.rank_env import THREADS_ENV, World, rank_env
from trainkit.distributed.scratch import scratch_folder
from trainkit.errors import MisconfigurationError

if TYPE_CHECKING:
    from trainkit.strategies.base import Strategy

# what every rank runs: fn(strategy placed in the rank, *args)
RankWork = tuple["Strategy", Callable[..., Any], tuple[object, ...]]


def unpicklable_path(
    obj: object, path: str, seen: set[int] | None = None, depth: int = 0
) -> str | None:
    """The attribute path of the first value in ``obj`` that cannot be pickled, or None."""
    seen = set() if seen is None else seen
    if id(obj) in seen or depth > 8:
        return None
    seen.add(id(obj))
    try:
        pickle.dumps(obj)
        return None
    except Exception:
        pass
    children: list[tuple[str, object]] = []
    if isinstance(obj, dict):
        children = [(f"{path}[{k!r}]", v) for k, v in obj.items()]
    elif isinstance(obj, list | tuple):
        children = [(f"{path}[{i}]", v) for i, v in enumerate(obj)]
    elif hasattr(obj, "__dict__"):
        attrs = dict(vars(obj))
        for group in ("_modules", "_parameters", "_buffers"):
            attrs.update(attrs.pop(group, {}) or {})
        children = [(f"{path}.{k}", v) for k, v in attrs.items() if k != "_trainer"]
    for child_path, child in children:
        found = unpicklable_path(child, child_path, seen, depth + 1)
        if found is not None:
            return found
    return f"{path}: {type(obj).__module__}.{type(obj).__qualname__}"


def check_picklable(items: dict[str, object]) -> None:
    for name, obj in items.items():
        found = unpicklable_path(obj, name)
        if found is not None:
            raise MisconfigurationError(
                f"ddp_spawn must pickle everything it sends to the ranks, but {found} cannot be "
                "pickled; create it in setup() instead, or use strategy: ddp"
            )


class SpawnLauncher:
    """Runs ``fn(strategy, *args)`` on every local rank, each a process started by
    torch.multiprocessing with ``start_method`` ('spawn' or 'fork'), and returns what it returned
    on global rank 0. ``strategy`` in each rank is the launcher's, placed in that rank
    (``Strategy.in_rank``). A failing rank raises here, in the caller."""

    def __init__(self, strategy: Strategy, start_method: str, node: NodePlacement) -> None:
        self.strategy = strategy
        self.start_method = start_method
        self.node = node  # checked when the strategy chose this launcher

    def launch(self, fn: Callable[..., Any], *args: object) -> Any:
        import torch
        import torch.multiprocessing as mp

        strategy = self.strategy
        folder = scratch_folder("spawn")
        result_path = str(Path(folder) / "result.pt")
        try:
            node_rank, address, port = self.node
            world = World(
                local_world_size=strategy.selection.count,
                num_nodes=strategy.num_nodes,
                node_rank=node_rank,
                main_address=address,
                main_port=int(port) if port else find_free_port(),
            )
            work: RankWork = (strategy, fn, args)
            payload = pickle.dumps(work) if self.start_method == "spawn" else work
            mp.start_processes(
                _run_rank,
                args=(payload, world, result_path),
                nprocs=strategy.selection.count,
                start_method=self.start_method,
            )
            return torch.load(result_path, weights_only=False)
        finally:
            shutil.rmtree(folder, ignore_errors=True)


def _run_rank(local_rank: int, payload: RankWork | bytes, world: World, result: str) -> None:
    import torch

    # a rank's own copy of the model and data (spawn: unpickled here; fork: inherited)
    strategy, fn, args = pickle.loads(payload) if isinstance(payload, bytes) else payload

    env = rank_env(world, local_rank, os.environ)
    os.environ.update(env)
    if THREADS_ENV in env:  # this process read the variable before it was set
        torch.set_num_threads(int(env[THREADS_ENV]))
    set_rank(int(os.environ["RANK"]))  # a forked rank inherited its parent's
    placed = TrainkitLauncherEnvironment.detect(
        os.environ
    )  # these variables, whatever job (SLURM...) it runs in
    assert placed is not None
    rank_strategy = strategy.in_rank(placed)
    output = fn(rank_strategy, *args)
    if rank_strategy.is_global_zero:
        partial = f"{result}.partial"
        torch.save(output, partial)  # plain bytes on disk: this rank exits before the caller reads
        os.replace(partial, result)
    rank_strategy.barrier()
    rank_strategy.teardown()
