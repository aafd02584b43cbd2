"""trainkit's rendezvous under SLURM and MPI: how the ranks of one job step find rank 0's store.

Rank 0 serves its store on a port the OS picks and answers on a *beacon* port derived from the
job and step (the first free one of a few candidates), saying which step it serves and where its
store is. The other ranks ask the candidates in turn and join only the beacon of their own step:
concurrent steps of a job never share a port, and a port taken by anything else costs one try.
With ``MASTER_PORT`` set, the store listens exactly there (free, or a one-line error).
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import time
from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import TYPE_CHECKING

from trainkit.distributed.node_service import Responder, listen
from trainkit.distributed.ports import check_port_free
from trainkit.errors import ConfigError

if TYPE_CHECKING:
    from torch.distributed import Store

    from trainkit.distributed.environments import ClusterEnvironment

CANDIDATES = 8  # beacon ports tried per step
CANDIDATE_STRIDE = 997  # apart, so the candidates of neighbouring steps rarely meet
ASK = b"trainkit rendezvous?\n"
DEFAULT_TIMEOUT = 1800.0  # torch's default for gloo/nccl collectives and the store
PROBE_SECONDS = 2.0  # a listener that is not a beacon gets this long to answer
JOINED_KEY = "trainkit/rendezvous/joined"  # how many ranks besides 0 found the store


def candidate_ports(first: int) -> list[int]:
    """The beacon ports of a step, in the order rank 0 binds and the other ranks ask."""
    base, span = 15000, 20000
    return [base + (first - base + k * CANDIDATE_STRIDE) % span for k in range(CANDIDATES)]


def _answer(name: str, store_port: int) -> bytes:
    return f"trainkit {store_port} {name}\n".encode()


def beacon_answer(reply: bytes) -> Callable[[socket.socket], bytes | None]:
    """Rank 0's answer to "which step do you serve, where is its store?"."""

    def answer(conn: socket.socket) -> bytes | None:
        return reply if conn.recv(len(ASK)) == ASK else None

    return answer


def open_beacon(cluster: ClusterEnvironment, reply: bytes) -> Responder:
    """Listen on the first free candidate port; say so when it is not the first."""
    ports = candidate_ports(cluster.main_port)
    for port in ports:
        try:
            sock = listen(port)
        except OSError:
            continue
        if port != ports[0]:
            print(
                f"trainkit: rendezvous port {ports[0]} ({cluster.rendezvous_id}) is taken on "
                f"{socket.gethostname()}; using {port}",
                file=sys.stderr,
                flush=True,
            )
        return Responder(sock, beacon_answer(reply), "trainkit-beacon")
    raise ConfigError(
        "rendezvous ports",
        ports,
        f"one free port on {cluster.main_address} for {cluster.rendezvous_id}",
        "set MASTER_PORT to a free port",
    )


def ask(address: str, port: int) -> tuple[int, str] | None:
    """The store port and step a beacon at ``address:port`` names, or None (no beacon there)."""
    try:
        with socket.create_connection((address, port), timeout=PROBE_SECONDS) as conn:
            conn.settimeout(PROBE_SECONDS)
            conn.sendall(ASK)
            reply = b""
            while not reply.endswith(b"\n") and len(reply) < 512:
                chunk = conn.recv(512)
                if not chunk:
                    break
                reply += chunk
    except OSError:
        return None
    words = reply.decode(errors="replace").strip().split(" ", 2)
    if len(words) != 3 or words[0] != "trainkit" or not words[1].isdigit():
        return None
    return int(words[1]), words[2]


def find_store_port(cluster: ClusterEnvironment, name: str, timeout: float) -> int:
    """Ask the candidate beacons until rank 0's for this step answers (or time runs out)."""
    ports = candidate_ports(cluster.main_port)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for port in ports:
            answer = ask(cluster.main_address, port)
            if answer is not None and answer[1] == name:
                return answer[0]
        time.sleep(0.1)
    raise TimeoutError(
        f"rank {cluster.global_rank}: no rank 0 answered for {name} on {cluster.main_address} "
        f"ports {ports} within {timeout:g} s; did rank 0 start?"
    )


def restarted_store(cluster: ClusterEnvironment, wait: timedelta) -> Store | None:
    """After a launcher whose store serves every attempt (``store_outlives_restarts``: torchrun's
    static rendezvous) restarted the workers: that store with a prefix of this restart, or the
    restarted workers would read the keys of the failed attempt (a dead rank's address) and
    never connect. None on a first attempt, and for other launchers (torch's env:// as usual)."""
    if not cluster.store_outlives_restarts:
        return None
    attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")
    if attempt in ("", "0") or os.environ.get("TORCHELASTIC_USE_AGENT_STORE") != "True":
        return None
    from torch.distributed import PrefixStore, TCPStore

    store = TCPStore(cluster.main_address, cluster.main_port, None, False, wait)
    return PrefixStore(f"trainkit/restart_{attempt}", store)


@contextlib.contextmanager
def rendezvous_store(cluster: ClusterEnvironment, timeout: float | None) -> Iterator[Store | None]:
    """The store the process group starts from (None: torch's env:// from MASTER_ADDR/PORT),
    for the duration of ``init_process_group``."""
    seconds = timeout or DEFAULT_TIMEOUT
    wait = timedelta(seconds=seconds)
    if not cluster.rendezvous_id:
        yield restarted_store(cluster, wait)
        return
    from torch.distributed import TCPStore

    name = f"{cluster.rendezvous_id} world {cluster.world_size}"
    is_zero = cluster.global_rank == 0
    if cluster.port_fixed:
        if is_zero:
            check_port_free(cluster.main_address, cluster.main_port)
        port, beacon = cluster.main_port, None
        store = TCPStore(cluster.main_address, port, None, is_zero, wait, wait_for_workers=False)
    elif is_zero:
        store = TCPStore(cluster.main_address, 0, None, True, wait, wait_for_workers=False)
        port = store.port
        beacon = open_beacon(cluster, _answer(name, port))
    else:
        port, beacon = find_store_port(cluster, name, seconds), None
        store = TCPStore(cluster.main_address, port, None, False, wait, wait_for_workers=False)
        store.add(JOINED_KEY, 1)
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = cluster.main_address, str(port)
    try:
        yield store
        if beacon is not None:  # the beacon answers until every rank found the store
            wait_for_ranks(store, cluster.world_size - 1, seconds)
    finally:
        if beacon is not None:
            beacon.close()


def wait_for_ranks(store: Store, count: int, timeout: float) -> None:
    """Until ``count`` ranks joined the store (nccl's process group returns before they do)."""
    deadline = time.monotonic() + timeout
    while store.add(JOINED_KEY, 0) < count and time.monotonic() < deadline:
        time.sleep(0.05)
