"""Under an external launcher (srun, torchrun, mpirun) the config and the launcher must agree on
the world: the same nodes and the same ranks per node. A mismatch is a one-line error before
anything trains, naming both numbers and the fix; trainkit never trains a world nobody asked for."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from trainkit.distributed.env import ClusterEnvironment
from trainkit.errors import ConfigError


@dataclass(frozen=True)
class LauncherWords:
    """How to name a launcher's numbers and the options that change them."""

    command: str
    per_node_variable: str
    per_node_fix: str  # formatted with n: ranks per node asked for
    nodes_variable: str
    nodes_fix: str  # formatted with n: nodes asked for


SLURM = LauncherWords(
    "srun",
    "SLURM_STEP_TASKS_PER_NODE",
    "srun --ntasks-per-node={n}",
    "SLURM_STEP_NUM_NODES",
    "a job on {n} nodes (sbatch/salloc --nodes={n}) and srun across them",
)
WORDS = {
    "slurm": SLURM,
    "slurm-node": SLURM,  # one task per node: it starts the node's ranks; nodes must agree
    "torchrun": LauncherWords(
        "torchrun",
        "LOCAL_WORLD_SIZE",
        "torchrun --nproc-per-node {n}",
        "WORLD_SIZE / LOCAL_WORLD_SIZE",
        "torchrun --nnodes {n} on each of {n} nodes",
    ),
    "horovod": LauncherWords(
        "horovodrun",
        "HOROVOD_LOCAL_SIZE",
        "horovodrun -np {n} on one host, -H host1:{n},host2:{n},... on several",
        "HOROVOD_SIZE / HOROVOD_LOCAL_SIZE",
        "horovodrun -H with {n} hosts",
    ),
    "mpi": LauncherWords(
        "mpirun",
        "OMPI_COMM_WORLD_LOCAL_SIZE",
        "mpirun --npernode {n} (or -np {n} on one node)",
        "the hosts of the MPI job",
        "mpirun on {n} hosts (--host/--hostfile)",
    ),
}


class PlannedWorld(Protocol):
    """The world a strategy asks for (``Strategy``'s members this check reads)."""

    @property
    def name(self) -> str: ...
    @property
    def cluster(self) -> ClusterEnvironment: ...
    @property
    def num_nodes(self) -> int: ...
    @property
    def processes_per_node(self) -> int: ...
    @property
    def process_per_device(self) -> bool: ...


def check_launched_world(strategy: PlannedWorld) -> None:
    """Refuse, before training, a world that the external launcher and the config disagree on."""
    cluster = strategy.cluster
    words = WORDS.get(cluster.name)
    if words is None:  # no launcher, or trainkit's own (which starts what the config asks)
        return
    asked_nodes, asked_local = strategy.num_nodes, strategy.processes_per_node
    if cluster.num_nodes != asked_nodes:
        raise ConfigError(
            "trainer.num_nodes",
            asked_nodes,
            f"{cluster.num_nodes}, the nodes {words.command} runs on "
            f"({words.nodes_variable}={cluster.num_nodes})",
            f"set trainer.num_nodes: {cluster.num_nodes}, or start "
            + words.nodes_fix.format(n=asked_nodes),
        )
    if cluster.local_world_size == asked_local or cluster.name == "slurm-node":
        return
    one_per_device = strategy.process_per_device
    what = "trainer.devices" if one_per_device else f"ranks per node of strategy {strategy.name}"
    fix = (
        f"set trainer.devices: {cluster.local_world_size}, or start {asked_local} per node: "
        if one_per_device
        else f"start {asked_local} per node: "
    ) + words.per_node_fix.format(n=asked_local)
    if cluster.name == "slurm":
        fix += ", or srun --ntasks-per-node=1 and trainkit starts the ranks of each node itself"
    raise ConfigError(
        what,
        asked_local,
        f"{cluster.local_world_size}, the ranks per node {words.command} started "
        f"({words.per_node_variable}={cluster.local_world_size})",
        fix,
    )
