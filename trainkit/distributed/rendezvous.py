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
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from typing import TYPE_CHECKING

from trainkit.distributed.env import ClusterEnvironment
from trainkit.distributed.ports import check_port_free
from trainkit.errors import ConfigError

if TYPE_CHECKING:
    from torch.distributed import Store

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


class Beacon:
    """Rank 0's answer to "which step do you serve, where is its store?" on one port."""

    def __init__(self, sock: socket.socket, reply: bytes) -> None:
        self.sock, self.reply = sock, reply
        self.port = sock.getsockname()[1]
        self.thread = threading.Thread(target=self._serve, name="trainkit-beacon", daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:  # closed: every rank has joined
                return
            with conn, contextlib.suppress(OSError):
                conn.settimeout(PROBE_SECONDS)
                if conn.recv(len(ASK)) == ASK:
                    conn.sendall(self.reply)
                    conn.recv(1)  # the asker closes first: no TIME_WAIT left on this port

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.shutdown(socket.SHUT_RDWR)
        self.sock.close()
        self.thread.join(timeout=5)


def open_beacon(cluster: ClusterEnvironment, reply: bytes) -> Beacon:
    """Listen on the first free candidate port; say so when it is not the first."""
    ports = candidate_ports(cluster.main_port)
    for port in ports:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT is no clash
        try:
            sock.bind(("", port))
            sock.listen(64)
        except OSError:
            sock.close()
            continue
        if port != ports[0]:
            print(
                f"trainkit: rendezvous port {ports[0]} ({cluster.rendezvous_id}) is taken on "
                f"{socket.gethostname()}; using {port}",
                file=sys.stderr,
                flush=True,
            )
        return Beacon(sock, reply)
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


def restarted_torchrun_store(cluster: ClusterEnvironment, wait: timedelta) -> Store | None:
    """After ``torchrun --max-restarts`` restarted the workers: torchrun's store with a prefix of
    this restart. Its static rendezvous keeps one store for every attempt, so restarted workers
    would read the keys of the failed attempt (a dead rank's address) and never connect.
    None on a first attempt (torch's env:// as usual)."""
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
        yield restarted_torchrun_store(cluster, wait) if cluster.name == "torchrun" else None
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
