"""What every kind of cluster environment is: one process's place in a job (ranks, sizes, the
rendezvous address) read from the variables its launcher set, and what the kind can do, as class
attributes. Code that decides reads a capability, never a kind's ``name`` (which is for messages).
Also the readers of those variables, shared by the kinds."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar, NamedTuple, Self

from trainkit.distributed.ports import check_resolvable
from trainkit.errors import ConfigError


@dataclass(frozen=True)
class LauncherWords:
    """How to name an external launcher's numbers and the options that change them (the world
    check compares the config with them, in one line)."""

    command: str
    per_node_variable: str
    per_node_fix: str  # formatted with n: ranks per node asked for
    nodes_variable: str
    nodes_fix: str  # formatted with n: nodes asked for
    per_node_alternative: str = ""  # another way out of a ranks-per-node mismatch


class NodePlacement(NamedTuple):
    """Where this node's launcher stands in the job."""

    node_rank: int
    main_address: str  # rank 0's node
    port: str  # the port every node agreed on; "" when this node alone picks a free one


@dataclass(frozen=True)
class ClusterEnvironment:
    """One process's place in a job: ranks, sizes and the rendezvous address (Lightning's
    ``ClusterEnvironment``, its read-outs as attributes). One subclass per kind, each with a
    ``detect(env)`` and its capabilities as class attributes.

    ``rendezvous_id`` names the job step for trainkit's own rendezvous (SLURM, MPI,
    horovodrun): rank 0 serves it on the first free port of the ones derived from
    ``main_port``, the other ranks find it there by that name. Empty: ``MASTER_ADDR``/
    ``MASTER_PORT`` as they are (torchrun, trainkit's launcher, a PyTorchJob)."""

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

    # ---- capabilities: read these, not the name --------------------------------------------
    name: ClassVar[str] = "none"  # for people: messages and the startup table
    # someone else started this process and its peers: trainkit starts no processes
    creates_processes_externally: ClassVar[bool] = False
    # the launcher's numbers that the config must match (None: nothing to compare)
    launcher_words: ClassVar[LauncherWords | None] = None
    restarted_by: ClassVar[str] = ""  # who restarts failed ranks, said to max_restarts; "": none
    joins_horovod: ClassVar[bool] = False  # horovod's allreduce can join these ranks
    # one store serves every restart of the job (torchrun's agent store): a restart needs its own
    # key prefix, or it reads the failed attempt's keys
    store_outlives_restarts: ClassVar[bool] = False
    # main_address is the launcher's host, not known to be rank 0's: rank 0 checks it is its own
    main_address_guessed: ClassVar[bool] = False

    @classmethod
    def detect(cls, env: Mapping[str, str]) -> Self | None:
        """This kind's environment when ``env`` holds its variables, else None; variables of
        this kind that disagree are a one-line error."""
        raise NotImplementedError(f"{cls.__name__} defines no detect")

    def node_placement(self, env: Mapping[str, str], num_nodes: int) -> NodePlacement:
        """Where trainkit's launcher on this node stands when it starts the node's ranks: its
        node rank, rank 0's address, and the port every node agreed on, from ``NODE_RANK``,
        ``MASTER_ADDR`` and ``MASTER_PORT``. Each is checked here, before any rank starts (both
        launchers ask): a bad one would make the ranks wait."""
        port = agreed_port(env)
        node_rank = read_int(env, "NODE_RANK")
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

    @classmethod
    def from_rank_variables(
        cls, env: Mapping[str, str], launcher: str, node_rank_variable: str
    ) -> Self:
        """The environment torch's variables describe (``WORLD_SIZE RANK LOCAL_RANK
        LOCAL_WORLD_SIZE MASTER_ADDR MASTER_PORT``, the node from ``node_rank_variable``), as
        ``launcher`` set them; ranks outside their world are a one-line error."""
        world, local = (
            read_int(env, "WORLD_SIZE", 1, low=1),
            read_int(env, "LOCAL_WORLD_SIZE", 1, low=1),
        )
        rank, local_rank = read_int(env, "RANK"), read_int(env, "LOCAL_RANK")
        check_ranks(launcher, world, rank, local_rank, local)
        return cls(
            world,
            rank,
            local_rank,
            read_int(env, node_rank_variable),
            local,
            env.get("MASTER_ADDR", "127.0.0.1"),
            read_port(env, 0)[0],
            num_nodes=max(1, world // max(1, local)),
        )


def read_int(env: Mapping[str, str], key: str, default: int = 0, low: int = 0) -> int:
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


def read_port(env: Mapping[str, str], derived: int) -> tuple[int, bool]:
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


def agreed_port(env: Mapping[str, str]) -> str:
    """MASTER_PORT as the user set it, checked ("" when unset: a port is picked or derived)."""
    port, fixed = read_port(env, 0)  # a bad MASTER_PORT fails here, before any rank starts
    return str(port) if fixed else ""


def check_ranks(launcher: str, world: int, rank: int, local_rank: int, local_size: int) -> None:
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
