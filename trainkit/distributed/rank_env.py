"""What trainkit's launchers tell each rank they start: the job's shape as one node sees it
(``World``) and the environment variables made from it (``rank_env``), which the rank reads back
(``environments.TrainkitLauncherEnvironment``), and how many intra-op threads each rank takes. The re-executing and
the spawning launcher both use these."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from trainkit.distributed.signals import LAUNCHED_ENV

THREADS_ENV = "OMP_NUM_THREADS"


@dataclass(frozen=True)
class World:
    """The shape of a job as seen from one node, and where rank 0 listens."""

    local_world_size: int
    num_nodes: int = 1
    node_rank: int = 0
    main_address: str = "127.0.0.1"
    main_port: int = 29500

    @property
    def world_size(self) -> int:
        return self.local_world_size * self.num_nodes

    def global_rank(self, local_rank: int) -> int:
        """The global rank of this node's ``local_rank`` (each node holds consecutive ranks)."""
        return self.node_rank * self.local_world_size + local_rank


def rank_env(world: World, local_rank: int, inherited: Mapping[str, str]) -> dict[str, str]:
    """``MASTER_ADDR MASTER_PORT WORLD_SIZE NODE_RANK LOCAL_RANK RANK LOCAL_WORLD_SIZE`` of one
    local rank of ``world``, the mark that trainkit's launcher started it, and, unless the
    ``inherited`` environment sets it (the user's choice stands), ``OMP_NUM_THREADS``: the rank's
    share of the CPUs."""
    env = {
        LAUNCHED_ENV: "1",
        "MASTER_ADDR": world.main_address,
        "MASTER_PORT": str(world.main_port),
        "WORLD_SIZE": str(world.world_size),
        "NODE_RANK": str(world.node_rank),
        "LOCAL_RANK": str(local_rank),
        "RANK": str(world.global_rank(local_rank)),
        "LOCAL_WORLD_SIZE": str(world.local_world_size),
    }
    if THREADS_ENV not in inherited:
        env[THREADS_ENV] = str(threads_per_rank(world.local_world_size))
    return env


def threads_per_rank(local_world_size: int) -> int:
    """The CPUs this process may run on shared by the node's ranks (at least one each), as
    torchrun and Lightning's launchers do: ranks that each take every core only wait on each
    other's threads."""
    return max(1, usable_cpus() // local_world_size)


def usable_cpus() -> int:
    """The CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # no affinity on this platform
        return os.cpu_count() or 1


def share_threads_in_one_process(env: Mapping[str, str]) -> int | None:
    """In a process no launcher started (one process trains): take the same share as a rank
    of one, unless ``OMP_NUM_THREADS`` is set (the user's choice stands); torch's own default
    can count CPUs this process may not run on. Call it before the user's code runs, so that
    their ``torch.set_num_threads`` wins. Returns the threads set, or None."""
    from trainkit.distributed.error_file import launcher_rank

    if THREADS_ENV in env or LAUNCHED_ENV in env or launcher_rank() is not None:
        return None
    import torch

    threads = threads_per_rank(1)
    if torch.get_num_threads() != threads:
        torch.set_num_threads(threads)
    return threads


def describe_threads(processes_per_node: int, env: Mapping[str, str]) -> str:
    """The startup table's intra-op threads of this process and the rule behind them."""
    import torch

    threads = torch.get_num_threads()
    external = LAUNCHED_ENV not in env and processes_per_node > 1  # torchrun, srun, mpirun
    if not external and threads == threads_per_rank(processes_per_node):
        who = "1 process" if processes_per_node == 1 else f"{processes_per_node} processes"
        cpus = usable_cpus()
        where = f"{cpus} CPU{'s' if cpus != 1 else ''} shared by {who}"
        return f"{threads} ({where}; OMP_NUM_THREADS overrides)"
    if THREADS_ENV in env:
        return f"{threads} (OMP_NUM_THREADS)"
    return f"{threads} (set by your code or the launcher)"
