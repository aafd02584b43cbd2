"""The launchers of one job on several nodes, working together (trainkit's own launcher with
``trainer.num_nodes`` > 1: ``NODE_RANK``, ``MASTER_ADDR``, ``MASTER_PORT`` on every node).

- Node 0's launcher listens on MASTER_PORT. For each start of the ranks it picks a free port for
  rank 0's store; the other nodes' launchers ask it for that port before they start their ranks.
  A node started before node 0 waits for it; a program that is not trainkit holding MASTER_PORT
  on node 0 is a one-line error on every node, not ranks waiting on it forever.
- When a node's ranks failed only because they lost contact with a peer, or a collective timed
  out with all of them waiting, its launcher asks the other launchers what happened: it names
  the node that failed and how, the node that does not answer, or the late rank and its node.
  The question says the job failed, so a node whose ranks are stuck stops them too.
- A launcher whose node caused the failure keeps answering, after its ranks ended, until every
  other node has asked (at most LINGER_SECONDS).
"""

from __future__ import annotations

import socket
import sys
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from trainkit.distributed.launchers.node_report import NodeAnswer, node_name
from trainkit.distributed.network import address_towards
from trainkit.distributed.node_service import NodeService, NotANode, ask, listen
from trainkit.distributed.ports import check_port_free, find_free_port
from trainkit.distributed.rank_env import World
from trainkit.distributed.signals import held_stop_signal
from trainkit.errors import ConfigError

JOIN_RETRY_SECONDS = 0.2
STRANGER_TRIES = 3  # answers from a program that is not trainkit before giving up
WAIT_NOTICE_SECONDS = 5.0  # a node waiting for node 0 longer than this says so, once
LINGER_SECONDS = 3.0
WAIT_SECONDS = 1800.0  # how long a node waits for node 0: torch's default rendezvous timeout

Status = dict[str, Any]


class NodeGaveUp(Exception):
    """This node's launcher stops before starting ranks; ``code`` is its exit code (the reason
    is already printed)."""

    def __init__(self, code: int) -> None:
        super().__init__(code)
        self.code = code


class JobNodes:
    """This node's launcher among the launchers of its job (see the module's description)."""

    def __init__(self, world: World, service_port: int) -> None:
        self.world = world
        self.main = f"{world.main_address}:{service_port}"  # node 0's launcher
        self.host = socket.gethostname()
        self.address = address_towards(world.main_address) or world.main_address
        self.name = node_name(world.node_rank, self.host, self.address)
        self.lock = threading.Lock()
        self.peers: dict[int, dict[str, str]] = {}  # node -> host, address, service
        self.generation = 0  # starts of the ranks so far (node 0 counts, the others follow)
        self.store_port = 0
        self.ranks_status: Callable[[], list[dict[str, Any]]] | None = None
        self.failure: Status | None = None  # cause, ranks, local: after this node's ranks failed
        self.asked_by: set[int] = set()
        self.failed_elsewhere = ""  # another node said the job failed there: why
        self.service = NodeService(self._listen(service_port), self.handle)

    @property
    def is_main(self) -> bool:
        return self.world.node_rank == 0

    def _listen(self, port: int) -> socket.socket:
        if not self.is_main:
            return listen(0)
        fix = "free it there, or set another MASTER_PORT on every node"
        check_port_free(self.world.main_address, port, fix)  # taken: one line, exit 2
        try:
            return listen(port)
        except OSError:  # taken since the check
            raise ConfigError(
                "MASTER_PORT", port, f"a free port on {self.world.main_address}", fix
            ) from None

    # ---- before each start of the ranks ---------------------------------------------------------
    def begin_attempt(self) -> int:
        """The port of rank 0's store for the next start of the ranks: picked on node 0, asked
        of node 0 elsewhere (waiting for it). ``NodeGaveUp`` when a stop signal arrives or node 0
        never answers."""
        with self.lock:
            self.failure, self.failed_elsewhere = None, ""
            self.asked_by.clear()
            if self.is_main:
                self.generation += 1
                self.store_port = find_free_port("")
                return self.store_port
        return self._join()

    def _join(self) -> int:
        request = {
            "ask": "join",
            "node": self.world.node_rank,
            "after": self.generation,
            "host": self.host,
            "address": self.address,
            "service": f"{self.address}:{self.service.port}",
            "local_world_size": self.world.local_world_size,
            "num_nodes": self.world.num_nodes,
        }
        started = time.monotonic()
        strangers, said = 0, False
        while True:
            if held_stop_signal() is not None:
                self._say("a stop signal arrived while waiting for node 0; stopped (nothing ran)")
                raise NodeGaveUp(75)
            try:
                answer = ask(self.main, request)
            except NotANode as err:
                strangers += 1
                if strangers >= STRANGER_TRIES:
                    raise self._stranger(str(err)) from None
            except OSError:
                strangers = 0  # nothing listens yet: node 0 starts later
            else:
                if "refused" in answer:
                    refused = answer["refused"]
                    raise ConfigError(refused[0], refused[1], refused[2], refused[3])
                if "store_port" in answer:
                    with self.lock:
                        self.generation = answer["generation"]
                        self.store_port = answer["store_port"]
                        self.peers = {int(k): v for k, v in answer["nodes"].items()}
                        self.failed_elsewhere = ""  # said of an earlier start while waiting
                    return self.store_port
            waited = time.monotonic() - started
            if waited > WAIT_SECONDS:
                self._say(f"node 0 did not answer at {self.main} within {WAIT_SECONDS:g} s")
                raise NodeGaveUp(1)
            if waited > WAIT_NOTICE_SECONDS and not said:
                self._say(f"waiting for node 0 at {self.main} (NODE_RANK=0 starts it)")
                said = True
            time.sleep(JOIN_RETRY_SECONDS)

    def _stranger(self, what: str) -> ConfigError:
        return ConfigError(
            "MASTER_PORT",
            int(self.main.rpartition(":")[2]),
            f"trainkit's launcher of node 0 listening on {self.main}",
            f"the program there {what}: it holds the port on rank 0's node; free it there or "
            "set another MASTER_PORT on every node",
        )

    def _say(self, text: str) -> None:
        print(f"trainkit: {self.name}: {text}", file=sys.stderr, flush=True)

    # ---- answering the other launchers ----------------------------------------------------------
    def handle(self, request: Status) -> Status:
        """The answer to one request of another node's launcher."""
        if request.get("ask") == "join" and self.is_main:
            return self._answer_join(request)
        if request.get("ask") == "status":
            return self._answer_status(request)
        return {"refused": f"unknown request {request.get('ask')!r}"}

    def _answer_join(self, request: Status) -> Status:
        node = int(request.get("node", -1))
        ours = (self.world.local_world_size, self.world.num_nodes)
        theirs = (request.get("local_world_size"), request.get("num_nodes"))
        if theirs != ours:
            self._say(f"refused node {node}: {theirs[0]} ranks on each of {theirs[1]} nodes there")
            return {
                "refused": [
                    "trainer.devices x trainer.num_nodes",
                    f"{theirs[0]} x {theirs[1]}",
                    f"{ours[0]} x {ours[1]}, as on node 0 ({self.name})",
                    "start every node with the same trainer.devices and trainer.num_nodes",
                ]
            }
        with self.lock:
            known = self.peers.get(node)
            if known and known["address"] != request.get("address"):
                return {
                    "refused": [
                        "NODE_RANK",
                        node,
                        f"a node index no other node uses (node {node} joined from "
                        f"{known['address']})",
                        "give each node its own NODE_RANK: 0, 1, ...",
                    ]
                }
            self.peers[node] = {k: str(request.get(k, "")) for k in ("host", "address", "service")}
            if self.generation <= int(request.get("after", 0)):
                return {"wait": "node 0 has not started its ranks again yet"}
            nodes = {str(k): v for k, v in self.peers.items()}
            return {"generation": self.generation, "store_port": self.store_port, "nodes": nodes}

    def _answer_status(self, request: Status) -> Status:
        with self.lock:
            asker = request.get("node")
            if isinstance(asker, int):
                self.asked_by.add(asker)
            failed = request.get("failed")
            this_start = request.get("generation") == self.generation  # not a failed one before
            if failed and this_start and self.failure is None and not self.failed_elsewhere:
                self.failed_elsewhere = f"{request.get('name', 'another node')}: {failed}"
            failure = self.failure
            ranks = failure["ranks"] if failure else self._live_ranks()
            return {
                "node": self.world.node_rank,
                "state": "failed" if failure else "running",
                "cause": failure["cause"] if failure and failure["local"] else "",
                "ranks": ranks,
                "nodes": {str(k): v for k, v in self.peers.items()},
            }

    def _live_ranks(self) -> list[dict[str, Any]]:
        try:
            return self.ranks_status() if self.ranks_status else []
        except OSError:  # the board went away with its ranks
            return []

    # ---- after a failure --------------------------------------------------------------------
    def record_failure(self, cause: str, ranks: list[dict[str, Any]], local: bool) -> None:
        """This node's ranks failed: what the others are told when they ask."""
        with self.lock:
            self.failure = {"cause": cause, "ranks": ranks, "local": local}

    def ask_others(self, cause: str) -> list[NodeAnswer]:
        """Every other node's status, asked at once; each question tells it the job failed."""
        request = {"ask": "status", "node": self.world.node_rank, "name": self.name}
        request.update(failed=cause, generation=self.generation)
        targets = self._others()
        with ThreadPoolExecutor(max_workers=max(1, len(targets))) as pool:
            futures = {
                node: pool.submit(_status_of, service, request)
                for node, (_, service) in targets.items()
            }
            answers = []
            for node, future in sorted(futures.items()):
                status, why = future.result()
                answers.append(NodeAnswer(node, targets[node][0], status, why))
        return answers

    def _others(self) -> dict[int, tuple[str, str]]:
        """Every other node: (its name, where its launcher answers)."""
        with self.lock:
            peers = dict(self.peers)
        others = {
            node: (node_name(node, info.get("host", ""), info.get("address", "")), info["service"])
            for node, info in peers.items()
            if node != self.world.node_rank and info.get("service")
        }
        if not self.is_main:
            address = self.world.main_address
            host = peers.get(0, {}).get("host", "")
            others[0] = (node_name(0, host, address), self.main)
        return others

    def linger(self) -> None:
        """After this node caused a failure: answer until every other node asked, at most
        LINGER_SECONDS."""
        with self.lock:
            local = bool(self.failure and self.failure["local"])
        if not local:
            return
        waiting_for = set(self._others())
        deadline = time.monotonic() + LINGER_SECONDS
        while time.monotonic() < deadline:
            with self.lock:
                if waiting_for <= self.asked_by:
                    return
            time.sleep(0.05)

    def close(self) -> None:
        self.service.close()


def _status_of(service: str, request: Status) -> tuple[Status | None, str]:
    try:
        return ask(service, request), ""
    except NotANode as err:
        return None, f"something else {err}"
    except OSError as err:
        return None, getattr(err, "strerror", None) or str(err) or type(err).__name__
