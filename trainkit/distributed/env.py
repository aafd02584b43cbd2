"""Cluster environments: who started this process, and what rank it is. First match wins:
torchrun, OpenMPI's mpirun, an srun step, MPICH/Intel MPI, trainkit's own launcher, nobody."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass

from trainkit.distributed import slurm
from trainkit.distributed.signals import ERROR_FILE_ENV
from trainkit.errors import ConfigError


@dataclass(frozen=True)
class ClusterEnvironment:
    """One process's place in a job: ranks, sizes and the rendezvous address.

    ``rendezvous_id`` names the job step for trainkit's own rendezvous (SLURM, MPI): rank 0
    serves it on the first free port of the ones derived from ``main_port``, the other ranks
    find it there by that name. Empty: ``MASTER_ADDR``/``MASTER_PORT`` as they are (torchrun,
    trainkit's launcher)."""

    name: str
    world_size: int = 1
    global_rank: int = 0
    local_rank: int = 0
    node_rank: int = 0
    local_world_size: int = 1
    main_address: str = "127.0.0.1"
    main_port: int = 0
    num_nodes: int = 1
    rendezvous_id: str = ""
    port_fixed: bool = False  # MASTER_PORT was set by the user: use it or fail, never move

    @property
    def external(self) -> bool:
        """Whether ranks were started by someone else (so trainkit starts no processes)."""
        return self.name not in ("none", "slurm-node")


def _int(env: Mapping[str, str], key: str, default: int = 0) -> int:
    value = env.get(key)
    return int(value) if value not in (None, "") else default


def _port(env: Mapping[str, str], derived: int) -> tuple[int, bool]:
    """MASTER_PORT when the user set it (fixed), else the derived port."""
    value = env.get("MASTER_PORT", "")
    return (int(value), True) if value.isdigit() else (derived, False)


def detect_torchelastic(env: Mapping[str, str]) -> ClusterEnvironment | None:
    if "TORCHELASTIC_RUN_ID" not in env:
        return None
    world, local = _int(env, "WORLD_SIZE", 1), _int(env, "LOCAL_WORLD_SIZE", 1)
    return ClusterEnvironment(
        "torchrun",
        world,
        _int(env, "RANK"),
        _int(env, "LOCAL_RANK"),
        _int(env, "GROUP_RANK"),
        local,
        env.get("MASTER_ADDR", "127.0.0.1"),
        _int(env, "MASTER_PORT"),
        num_nodes=max(1, world // max(1, local)),
    )


def detect_slurm(env: Mapping[str, str]) -> ClusterEnvironment | None:
    """A task of an srun step (decided by the step variables, never by the job's name); a batch
    script or salloc shell is no task: one with several tasks is an error (use srun).

    With one task on every node of the step (``srun -n 1``, ``srun --pty bash``,
    ``srun --ntasks-per-node=1``), each task is its node's launcher ("slurm-node"): trainkit
    starts ``devices`` ranks there, like torchrun. With more, every task is a rank ("slurm")."""
    if "SLURM_NTASKS" not in env:
        return None
    if not slurm.in_step(env):
        slurm.check_not_batch_with_tasks(env)
        return None
    world, nodes, local = slurm.step_shape(env)
    job, step = _int(env, "SLURM_JOB_ID"), slurm.step_id(env)
    nodelist = env.get("SLURM_STEP_NODELIST") or env.get("SLURM_NODELIST", "127.0.0.1")
    port, fixed = _port(env, slurm.step_port(job, step))
    return ClusterEnvironment(
        "slurm-node" if world == nodes else "slurm",
        world,
        _int(env, "SLURM_PROCID"),
        _int(env, "SLURM_LOCALID"),
        _int(env, "SLURM_NODEID"),
        local,
        env.get("MASTER_ADDR") or slurm.first_host(nodelist),
        port,
        num_nodes=nodes,
        rendezvous_id=f"slurm job {job} step {step}",
        port_fixed=fixed,
    )


def _mpi_address(env: Mapping[str, str], nodes: int, launcher: str) -> str:
    """MASTER_ADDR, required once the job spans several nodes (MPI names no main node)."""
    address = env.get("MASTER_ADDR")
    if address:
        return address
    if nodes > 1:
        raise ConfigError(
            "MASTER_ADDR",
            "",
            f"the address of rank 0's node for an MPI job on {nodes} nodes",
            f"pass it to every rank: {launcher} -x MASTER_ADDR=$(hostname) ... "
            "(see docs/clusters.md)",
        )
    return "127.0.0.1"


def detect_open_mpi(env: Mapping[str, str]) -> ClusterEnvironment | None:
    """A rank started by OpenMPI's mpirun (also inside a SLURM job, where its ranks carry the
    job's variables too). OMPI_COMM_WORLD_NODE_RANK is a rank *within* a node, so the node
    index comes from the rank and the ranks per node (mpirun places ranks node by node)."""
    if "OMPI_COMM_WORLD_SIZE" not in env:
        return None
    prefix = "OMPI_COMM_WORLD_"
    world, rank = _int(env, prefix + "SIZE", 1), _int(env, prefix + "RANK")
    local_rank, local_size = _int(env, prefix + "LOCAL_RANK"), _int(env, prefix + "LOCAL_SIZE", 1)
    nodes = _int(env, "OMPI_MCA_orte_num_nodes", max(1, -(-world // max(1, local_size))))
    job = _int(env, "OMPI_MCA_ess_base_jobid")
    default_port = slurm.PORT_BASE + job % slurm.PORT_SPAN if job else 29500
    ranks = (world, rank, local_rank, local_size, nodes)
    return _mpi_environment(env, ranks, default_port, "mpirun", f"mpi job {job}")


def detect_pmi(env: Mapping[str, str]) -> ClusterEnvironment | None:
    """A rank started by MPICH's or Intel MPI's mpiexec (PMI variables)."""
    if "PMI_SIZE" not in env or "PMI_RANK" not in env:
        return None
    world, rank = _int(env, "PMI_SIZE", 1), _int(env, "PMI_RANK")
    local_rank = _int(env, "MPI_LOCALRANKID", rank)
    local_size = _int(env, "MPI_LOCALNRANKS", world)
    nodes = max(1, -(-world // max(1, local_size)))
    ranks = (world, rank, local_rank, local_size, nodes)
    return _mpi_environment(env, ranks, 29500, "mpiexec -genv", "mpi")


def _mpi_environment(
    env: Mapping[str, str],
    ranks: tuple[int, int, int, int, int],
    default_port: int,
    launcher: str,
    rendezvous_id: str,
) -> ClusterEnvironment:
    """An MPI launcher's ranks ``(world, rank, local rank, local size, nodes)`` as an
    environment: the node index from the rank and the ranks per node (placed node by node)."""
    world, rank, local_rank, local_size, nodes = ranks
    port, fixed = _port(env, default_port)
    return ClusterEnvironment(
        "mpi",
        world,
        rank,
        local_rank,
        (rank - local_rank) // max(1, local_size),
        local_size,
        _mpi_address(env, nodes, launcher),
        port,
        num_nodes=nodes,
        rendezvous_id=rendezvous_id,
        port_fixed=fixed,
    )


def detect_trainkit(env: Mapping[str, str]) -> ClusterEnvironment | None:
    if "LOCAL_RANK" not in env or "WORLD_SIZE" not in env:
        return None
    world, local = _int(env, "WORLD_SIZE", 1), _int(env, "LOCAL_WORLD_SIZE", 1)
    return ClusterEnvironment(
        "trainkit",
        world,
        _int(env, "RANK"),
        _int(env, "LOCAL_RANK"),
        _int(env, "NODE_RANK"),
        local,
        env.get("MASTER_ADDR", "127.0.0.1"),
        _int(env, "MASTER_PORT"),
        num_nodes=max(1, world // max(1, local)),
    )


DETECTORS = (detect_torchelastic, detect_open_mpi, detect_slurm, detect_pmi, detect_trainkit)


def detect_environment(env: Mapping[str, str] | None = None) -> ClusterEnvironment:
    """The first environment whose variables are present, else a lone process ("none").
    A rank of trainkit's own launcher is always "trainkit", whatever job it runs in."""
    env = os.environ if env is None else env
    if ERROR_FILE_ENV in env:
        found = detect_trainkit(env)
        if found is not None:
            return found
    for detector in DETECTORS:
        found = detector(env)
        if found is not None:
            return found
    return ClusterEnvironment("none")


def node_placement(cluster: ClusterEnvironment, env: Mapping[str, str]) -> tuple[int, str, str]:
    """Where trainkit's launcher on this node stands: its node rank, rank 0's address, and the
    port every node agreed on ("" when this node alone picks a free one)."""
    port = env.get("MASTER_PORT", "")
    if cluster.name == "slurm-node":  # one srun task per node: its place in the step
        if not port and cluster.num_nodes > 1:
            port = str(cluster.main_port)  # derived from the job and step, the same on each node
        return cluster.node_rank, cluster.main_address, port
    return _int(env, "NODE_RANK"), env.get("MASTER_ADDR", "127.0.0.1"), port


def output_is_terminal() -> bool:
    """Whether stdout is a terminal a person watches. mpirun gives its ranks a pseudo-terminal
    even when its own output goes to a file, so MPI ranks count as not a terminal."""
    if "OMPI_COMM_WORLD_SIZE" in os.environ or "PMI_SIZE" in os.environ:
        return False
    return sys.stdout.isatty()
