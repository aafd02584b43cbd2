"""Ranks that OpenMPI's mpirun started (also inside a SLURM job, where its ranks carry the job's
variables too). OMPI_COMM_WORLD_NODE_RANK is a rank *within* a node, so the node index comes
from the rank and the ranks per node (mpirun places ranks node by node)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar, Self

from trainkit.distributed import slurm
from trainkit.distributed.environments.base import (
    ClusterEnvironment,
    LauncherWords,
    read_int,
    read_port,
)
from trainkit.errors import ConfigError

PREFIX = "OMPI_COMM_WORLD_"


class OpenMPIEnvironment(ClusterEnvironment):
    name = "mpi"
    creates_processes_externally = True
    launcher_words = LauncherWords(
        "mpirun",
        "OMPI_COMM_WORLD_LOCAL_SIZE",
        "mpirun --npernode {n} (or -np {n} on one node)",
        "the hosts of the MPI job",
        "mpirun on {n} hosts (--host/--hostfile)",
    )
    restarted_by = "mpirun has none: run the job again (fit resumes with --ckpt_path last)"
    joins_horovod = True  # horovodrun's MPI mode runs mpirun
    address_fix: ClassVar[str] = "mpirun -x MASTER_ADDR=$(hostname)"  # to every rank

    @classmethod
    def detect(cls, env: Mapping[str, str]) -> Self | None:
        if PREFIX + "SIZE" not in env:
            return None
        world, rank = read_int(env, PREFIX + "SIZE", 1), read_int(env, PREFIX + "RANK")
        local_rank = read_int(env, PREFIX + "LOCAL_RANK")
        local_size = read_int(env, PREFIX + "LOCAL_SIZE", 1)
        nodes = read_int(env, "OMPI_MCA_orte_num_nodes", max(1, -(-world // max(1, local_size))))
        job = read_int(env, "OMPI_MCA_ess_base_jobid")
        default_port = slurm.PORT_BASE + job % slurm.PORT_SPAN if job else 29500
        ranks = (world, rank, local_rank, local_size, nodes)
        return cls.from_mpi_ranks(env, ranks, default_port, f"mpi job {job}")

    @classmethod
    def from_mpi_ranks(
        cls,
        env: Mapping[str, str],
        ranks: tuple[int, int, int, int, int],
        default_port: int,
        rendezvous_id: str,
    ) -> Self:
        """An MPI launcher's ranks ``(world, rank, local rank, local size, nodes)`` as an
        environment: the node index from the rank and the ranks per node (placed node by node)."""
        world, rank, local_rank, local_size, nodes = ranks
        port, fixed = read_port(env, default_port)
        return cls(
            world,
            rank,
            local_rank,
            (rank - local_rank) // max(1, local_size),
            local_size,
            main_address(env, nodes, cls.address_fix),
            port,
            num_nodes=nodes,
            rendezvous_id=rendezvous_id,
            port_fixed=fixed,
        )


def main_address(env: Mapping[str, str], nodes: int, launcher: str) -> str:
    """MASTER_ADDR, required once the job spans several nodes (MPI names no main node)."""
    address = env.get("MASTER_ADDR")
    if address:
        return address
    if nodes > 1:
        raise ConfigError(
            "MASTER_ADDR",
            "",
            f"the address of rank 0's node for an MPI job on {nodes} nodes",
            f"pass it to every rank: {launcher} ... (see docs/clusters.md)",
        )
    return "127.0.0.1"
