"""Cluster environments: who started this process, and what rank it is. First match wins:
torchrun, horovodrun (its gloo mode), OpenMPI's mpirun, an srun step, MPICH/Intel MPI,
trainkit's own launcher, nobody."""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import NamedTuple

from trainkit.distributed import slurm
from trainkit.distributed.ports import check_resolvable
from trainkit.distributed.signals import LAUNCHED_ENV
from trainkit.errors import ConfigError


@dataclass(frozen=True)
class ClusterEnvironment:
    """One process's place in a job: ranks, sizes and the rendezvous address.

    ``rendezvous_id`` names the job step for trainkit's own rendezvous (SLURM, MPI,
    horovodrun): rank 0 serves it on the first free port of the ones derived from
    ``main_port``, the other ranks find it there by that name. Empty: ``MASTER_ADDR``/
    ``MASTER_PORT`` as they are (torchrun, trainkit's launcher)."""

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


RANK_VARIABLES = ("WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE")


def _int(env: Mapping[str, str], key: str, default: int = 0, low: int = 0) -> int:
    """The integer in ``key`` (``default`` when unset); anything else is a one-line error."""
    value = env.get(key)
    if value is None or value.strip() == "":
        return default
    try:
        number = int(value)
    except ValueError:
        number = low - 1
    if number < low:
        raise ConfigError(
            key,
            value,
            f"an integer >= {low}",
            f"fix or unset {key} in the environment that started trainkit",
        )
    return number


def _port(env: Mapping[str, str], derived: int) -> tuple[int, bool]:
    """MASTER_PORT when the user set it (fixed), else the derived port."""
    value = env.get("MASTER_PORT", "").strip()
    if not value:
        return derived, False
    port = int(value) if value.isdigit() else 0
    if not 0 < port < 65536:
        raise ConfigError(
            "MASTER_PORT",
            value,
            "a port number 1-65535",
            "unset it to let trainkit pick a free port (or use a free port above 1024)",
        )
    return port, True


def _check_ranks(launcher: str, world: int, rank: int, local_rank: int, local_size: int) -> None:
    """Ranks inside their world: 0 <= RANK < WORLD_SIZE, 0 <= LOCAL_RANK < LOCAL_WORLD_SIZE."""
    for name, value, size, size_name in (
        ("RANK", rank, world, "WORLD_SIZE"),
        ("LOCAL_RANK", local_rank, local_size, "LOCAL_WORLD_SIZE"),
    ):
        if value >= size:
            raise ConfigError(
                name,
                str(value),
                f"a rank below {size_name}={size}",
                f"the variables {launcher} set disagree; start the job again with it",
            )


def detect_torchelastic(env: Mapping[str, str]) -> ClusterEnvironment | None:
    if "TORCHELASTIC_RUN_ID" not in env:
        return None
    world, local = _int(env, "WORLD_SIZE", 1, low=1), _int(env, "LOCAL_WORLD_SIZE", 1, low=1)
    rank, local_rank = _int(env, "RANK"), _int(env, "LOCAL_RANK")
    _check_ranks("torchrun", world, rank, local_rank, local)
    return ClusterEnvironment(
        "torchrun",
        world,
        rank,
        local_rank,
        _int(env, "GROUP_RANK"),
        local,
        env.get("MASTER_ADDR", "127.0.0.1"),
        _port(env, 0)[0],
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


HOROVOD_PREFIX = "HOROVOD_"


def _horovod_address(env: Mapping[str, str], nodes: int) -> str:
    """Rank 0's address under horovodrun: MASTER_ADDR when given; 127.0.0.1 on one host; else
    the host horovodrun runs on (its rendezvous address), where rank 0 runs when horovodrun is
    started on the first host of ``-H`` (rank 0 checks it: strategies/horovod.py)."""
    address = env.get("MASTER_ADDR", "").strip()
    if address:
        return address
    if nodes == 1:
        return "127.0.0.1"
    return env.get(HOROVOD_PREFIX + "GLOO_RENDEZVOUS_ADDR", "").strip() or "127.0.0.1"


def detect_horovod(env: Mapping[str, str]) -> ClusterEnvironment | None:
    """A rank started by horovodrun in its gloo mode (``horovodrun --gloo``, or where horovod
    has no MPI): HOROVOD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE and _CROSS_RANK (the node).
    horovodrun's MPI mode runs mpirun, whose ranks are OpenMPI's. Its rendezvous is an HTTP
    server of horovod's own: trainkit's rendezvous derives its port from it, one per run."""
    prefix = HOROVOD_PREFIX
    if prefix + "RANK" not in env or prefix + "SIZE" not in env:
        return None
    world, rank = _int(env, prefix + "SIZE", 1, low=1), _int(env, prefix + "RANK")
    local_rank = _int(env, prefix + "LOCAL_RANK")
    local_size = _int(env, prefix + "LOCAL_SIZE", 1, low=1)
    _check_ranks("horovodrun", world, rank, local_rank, local_size)
    nodes = max(1, -(-world // local_size))
    served = _int(env, prefix + "GLOO_RENDEZVOUS_PORT")
    port, fixed = _port(env, slurm.PORT_BASE + served % slurm.PORT_SPAN if served else 29500)
    address = _horovod_address(env, nodes)
    server = env.get(prefix + "GLOO_RENDEZVOUS_ADDR", "")
    return ClusterEnvironment(
        "horovod",
        world,
        rank,
        local_rank,
        _int(env, prefix + "CROSS_RANK"),
        local_size,
        address,
        port,
        num_nodes=nodes,
        rendezvous_id=f"horovodrun {server}:{served}" if served else "horovodrun",
        port_fixed=fixed,
    )


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
    """A rank that trainkit's own launcher started (it sets TRAINKIT_LAUNCHED)."""
    if LAUNCHED_ENV not in env:
        return None
    world, local = _int(env, "WORLD_SIZE", 1, low=1), _int(env, "LOCAL_WORLD_SIZE", 1, low=1)
    rank, local_rank = _int(env, "RANK"), _int(env, "LOCAL_RANK")
    _check_ranks("trainkit's launcher", world, rank, local_rank, local)
    return ClusterEnvironment(
        "trainkit",
        world,
        rank,
        local_rank,
        _int(env, "NODE_RANK"),
        local,
        env.get("MASTER_ADDR", "127.0.0.1"),
        _port(env, 0)[0],
        num_nodes=max(1, world // max(1, local)),
    )


DETECTORS = (detect_torchelastic, detect_horovod, detect_open_mpi, detect_slurm, detect_pmi)


def refuse_stale_rank_variables(env: Mapping[str, str]) -> None:
    """Rank variables with no launcher behind them (left in a shell, or copied from a job
    script) would make this lone process wait for peers that never start: one line instead.
    A world of one (WORLD_SIZE=1, ranks 0) is what a lone process is, and passes."""
    given = {key: env[key] for key in RANK_VARIABLES if env.get(key, "").strip()}
    if not given:
        return
    world, rank = _int(env, "WORLD_SIZE", 1, low=1), _int(env, "RANK")
    local_rank, local_size = _int(env, "LOCAL_RANK"), _int(env, "LOCAL_WORLD_SIZE", 1, low=1)
    if (world, rank, local_rank, local_size) == (1, 0, 0, 1):
        return
    raise ConfigError(
        "rank variables",
        " ".join(f"{key}={value}" for key, value in given.items()),
        "them only in ranks a launcher started (torchrun, srun, mpirun); none started this "
        "process, which would wait for its peers forever",
        f"unset {' '.join(given)} (trainkit starts its own ranks from trainer.devices and "
        "trainer.num_nodes), or start the job with torchrun",
    )


def detect_environment(env: Mapping[str, str] | None = None) -> ClusterEnvironment:
    """The first environment whose variables are present, else a lone process ("none").
    A rank of trainkit's own launcher is always "trainkit", whatever job it runs in."""
    env = os.environ if env is None else env
    found = detect_trainkit(env)
    if found is not None:
        return found
    for detector in DETECTORS:
        found = detector(env)
        if found is not None:
            return found
    refuse_stale_rank_variables(env)
    return ClusterEnvironment("none")


class NodePlacement(NamedTuple):
    """Where this node's launcher stands in the job."""

    node_rank: int
    main_address: str  # rank 0's node
    port: str  # the port every node agreed on; "" when this node alone picks a free one


def node_placement(
    cluster: ClusterEnvironment, env: Mapping[str, str], num_nodes: int
) -> NodePlacement:
    """Where trainkit's launcher on this node stands: its node rank, rank 0's address, and the
    port every node agreed on ("" when this node alone picks a free one). Each is checked
    here, before any rank starts (both launchers ask): a bad one would make the ranks wait."""
    given_port, fixed = _port(env, 0)  # a bad MASTER_PORT fails here, before any rank starts
    port = str(given_port) if fixed else ""
    if cluster.name == "slurm-node":  # one srun task per node: its place in the step
        if not port and cluster.num_nodes > 1:
            port = str(cluster.main_port)  # derived from the job and step, the same on each node
        return NodePlacement(cluster.node_rank, cluster.main_address, port)
    node_rank = _int(env, "NODE_RANK")
    if node_rank >= num_nodes:
        raise ConfigError(
            "NODE_RANK",
            node_rank,
            f"a node index below trainer.num_nodes ({num_nodes})",
            "set NODE_RANK to 0 on the first machine, 1 on the second, ...",
        )
    if not port and num_nodes > 1:  # each node would pick a port of its own and never meet
        raise ConfigError(
            "MASTER_PORT",
            "",
            f"the port trainkit listens on at rank 0's node, the same on all {num_nodes} nodes",
            "set it on every node, e.g. MASTER_PORT=29500 (free on rank 0's node), with "
            "NODE_RANK and MASTER_ADDR (docs/clusters.md)",
        )
    address = env.get("MASTER_ADDR", "").strip() or "127.0.0.1"
    if address != "127.0.0.1":
        check_resolvable(address)
    return NodePlacement(node_rank, address, port)


def output_is_terminal() -> bool:
    """Whether stdout is a terminal a person watches. mpirun gives its ranks a pseudo-terminal
    even when its own output goes to a file, so MPI ranks count as not a terminal."""
    if "OMPI_COMM_WORLD_SIZE" in os.environ or "PMI_SIZE" in os.environ:
        return False
    return sys.stdout.isatty()
