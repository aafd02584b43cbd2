"""The launchers of a job on several nodes, in one process over 127.0.0.1: node 0 hands out rank
0's store port, a node with another shape or a stranger on MASTER_PORT is refused in one line,
and after a failure a node names what happened elsewhere. (Real nodes, each in its own network
namespace: tests/integration/clusters/test_two_nodes.py.) Also how gloo picks its interface."""

from __future__ import annotations

import dataclasses
import socket
import threading
from collections.abc import Iterator

import pytest

from trainkit.distributed.environments import LoneEnvironment
from trainkit.distributed.launchers.job_nodes import JobNodes
from trainkit.distributed.launchers.node_report import (
    NodeAnswer,
    lost_contact,
    positions_of,
    timed_out,
)
from trainkit.distributed.network import (
    GLOO_INTERFACE_ENV,
    address_towards,
    gloo_interface,
    interface_of,
)
from trainkit.distributed.ports import find_free_port
from trainkit.distributed.rank_board import BACKWARD, TRAINING_STEP, RankPosition
from trainkit.distributed.rank_env import World
from trainkit.errors import ConfigError


def world(node: int, port: int, per_node: int = 2) -> World:
    return World(per_node, num_nodes=2, node_rank=node, main_address="127.0.0.1", main_port=port)


@pytest.fixture
def job() -> Iterator[list[JobNodes]]:
    """Node 0's and node 1's launchers of one job (node 1 has not joined yet)."""
    port = find_free_port()
    made = [JobNodes(world(0, port), port), JobNodes(world(1, port), port)]
    yield made
    for nodes in made:
        nodes.close()


def test_node_0_picks_the_store_port_and_the_other_nodes_ask_it(job):
    node0, node1 = job
    store_port = node0.begin_attempt()
    assert node1.begin_attempt() == store_port != node0.main.rpartition(":")[2]
    assert node0.peers[1]["service"] == f"127.0.0.1:{node1.service.port}"
    again = node0.begin_attempt()  # a restart: a new store, and node 1 waits for it
    assert node1.begin_attempt() == again


def test_a_node_started_with_another_shape_is_refused_in_one_line(job):
    node0, _ = job
    node0.begin_attempt()
    port = int(node0.main.rpartition(":")[2])
    odd = JobNodes(world(1, port, per_node=3), port)
    try:
        with pytest.raises(ConfigError) as refused:
            odd.begin_attempt()
    finally:
        odd.close()
    assert str(refused.value).startswith(
        "trainer.devices x trainer.num_nodes '3 x 2'; expected 2 x 2, as on node 0"
    )


def test_a_stranger_on_master_port_is_one_line_not_a_wait():
    with socket.socket() as stranger:
        stranger.bind(("127.0.0.1", 0))
        stranger.listen()
        port = stranger.getsockname()[1]

        def answer_nonsense() -> None:
            for _ in range(3):
                conn, _ = stranger.accept()
                with conn:
                    conn.sendall(b"HTTP/1.1 400 Bad Request\r\n\r\n")

        threading.Thread(target=answer_nonsense, daemon=True).start()
        node1 = JobNodes(world(1, port), port)
        try:
            with pytest.raises(ConfigError, match=rf"^MASTER_PORT {port}; expected trainkit's"):
                node1.begin_attempt()
        finally:
            node1.close()


def test_a_node_whose_ranks_only_lost_contact_names_the_node_that_failed(job):
    node0, node1 = job
    node0.begin_attempt()
    node1.begin_attempt()
    node1.record_failure("rank 2 was killed by SIGKILL", [], local=True)
    lines = lost_contact(node0.ask_others("rank 0 failed with exit code 1"))
    assert lines == [
        f"the job failed on node 1 ({socket.gethostname()}, 127.0.0.1): rank 2 was killed by "
        "SIGKILL; this node's ranks only lost contact with it"
    ]


def test_asking_a_running_node_tells_it_the_job_failed(job):
    node0, node1 = job
    node0.begin_attempt()
    node1.begin_attempt()
    node0.ask_others("rank 0 failed with exit code 1 (RuntimeError: timed out)")
    assert node1.failed_elsewhere == (
        f"{node0.name}: rank 0 failed with exit code 1 (RuntimeError: timed out)"
    )


def test_a_failure_of_an_earlier_start_does_not_stop_the_next(job):
    node0, node1 = job
    node0.begin_attempt()
    node1.begin_attempt()
    node0.begin_attempt()  # node 0 started again; node 1 still runs the first start
    node0.ask_others("rank 0 failed with exit code 1")
    assert node1.failed_elsewhere == ""


def test_a_node_gone_is_named_as_not_answering(job):
    node0, node1 = job
    node0.begin_attempt()
    node1.begin_attempt()
    node1.close()
    (line,) = lost_contact(node0.ask_others("rank 0 failed"))
    refused = f"node 1 ({socket.gethostname()}, 127.0.0.1) does not answer (Connection refused)"
    assert line.startswith(f"{refused}: its trainkit launcher is gone")


def test_without_master_port_two_nodes_would_never_meet():
    with pytest.raises(ConfigError, match=r"^MASTER_PORT ''; expected the port trainkit listens"):
        LoneEnvironment().node_placement({"NODE_RANK": "1"}, num_nodes=2)


def position(rank: int, phase: int) -> RankPosition:
    return RankPosition(rank, phase, epoch=0, batch=2, seconds=4.1)


def test_a_late_rank_on_another_node_is_named_with_its_node():
    board = [{"rank": 1, "phase": TRAINING_STEP, "epoch": 0, "batch": 2, "seconds": 4.1}]
    answers = [NodeAnswer(1, "node 1 (host, 10.0.0.2)", {"ranks": board})]
    (line,) = timed_out([position(0, BACKWARD)], answers)
    assert line == (
        "a collective timed out: late: rank 1 in training_step (epoch 0, batch 2, for 4.1 s) on "
        "node 1 (host, 10.0.0.2); waiting: rank 0 in backward (gradient all-reduce) (epoch 0, "
        "batch 2, for 4.1 s)"
    )


def test_a_timeout_with_every_rank_of_every_node_waiting_is_a_collective_only_some_call():
    board = [{"rank": 1, "phase": BACKWARD, "epoch": 0, "batch": 2, "seconds": 4.1}]
    answers = [NodeAnswer(1, "node 1 (host, 10.0.0.2)", {"ranks": board})]
    (line,) = timed_out([position(0, BACKWARD)], answers)
    assert line.startswith("a collective timed out with every rank of every node waiting (ranks")
    assert line.endswith("some rank called a collective the others never call")


@pytest.mark.parametrize("phase", [BACKWARD, TRAINING_STEP], ids=["backward", "training_step"])
def test_a_timeout_with_the_other_node_silent_says_it_is_down(phase):
    """Wherever this node's ranks wait together: in backward's all-reduce, or inside the step
    (DDP broadcasts buffers in forward), the silent node is the cause."""
    answers = [NodeAnswer(1, "node 1 (10.0.0.2)", None, "timed out")]
    (line,) = timed_out([position(0, phase), position(1, phase)], answers)
    assert line.startswith("a collective timed out with every rank of this node waiting (ranks 0-1")
    assert line.endswith("node 1 (10.0.0.2) does not answer (timed out): the machine, or the "
                         "network to it, is down")  # fmt: skip


def test_a_rank_behind_its_node_is_not_blamed_on_a_silent_node():
    answers = [NodeAnswer(1, "node 1 (10.0.0.2)", None, "timed out")]
    lines = timed_out([position(0, BACKWARD), position(1, TRAINING_STEP)], answers)
    assert lines == ["node 1 (10.0.0.2) does not answer (timed out): the machine, or the network "
                     "to it, is down"]  # fmt: skip


def routable_address() -> str:
    """An IPv4 address of this machine on an interface other than loopback."""
    address = address_towards("192.0.2.1")  # TEST-NET-1: only picks the default route
    if not address or address.startswith("127."):
        pytest.skip("no network interface besides loopback here")
    return address


def test_gloo_uses_the_interface_that_reaches_rank_0_when_the_host_name_is_loopback(
    monkeypatch,
):
    address = routable_address()
    monkeypatch.setattr(socket, "gethostname", lambda: "localhost")
    interface = gloo_interface(address, {})
    assert interface and interface != "lo" and interface_of(address) == interface


def test_gloo_keeps_its_own_choice_where_it_works(monkeypatch):
    address = routable_address()
    monkeypatch.setattr(socket, "gethostname", lambda: "localhost")
    assert gloo_interface(address, {GLOO_INTERFACE_ENV: "eth7"}) == ""  # the user's
    assert gloo_interface("127.0.0.1", {}) == ""  # rank 0 on this machine's loopback
    monkeypatch.setattr(socket, "gethostname", lambda: address)
    assert gloo_interface(address, {}) == ""  # the host name resolves to a routable address


def test_a_rank_behind_only_inside_an_all_reduce_waits_for_the_silent_node():
    """Node 1 cut off mid all-reduce: rank 0 had its result and went on to the next batch's
    step, rank 1 still waits for node 1's part: the silent node is the cause, not rank 1."""
    answers = [NodeAnswer(1, "node 1 (10.0.0.2)", None, "timed out")]
    own = [
        RankPosition(0, TRAINING_STEP, epoch=0, batch=3, seconds=6.2),
        RankPosition(1, BACKWARD, epoch=0, batch=2, seconds=6.2),
    ]
    (line,) = timed_out(own, answers)
    assert line.startswith("a collective timed out with every rank of this node waiting (rank 0")
    assert line.endswith("node 1 (10.0.0.2) does not answer (timed out): the machine, or the "
                         "network to it, is down")  # fmt: skip


def test_a_rank_that_raised_a_collective_timeout_inside_its_step_waits_for_the_silent_node():
    """Node 1 cut off during DDP's buffer broadcast in forward: rank 0 had sent its buffers and
    went on to backward, rank 1 raised the timeout inside training_step. It was inside a
    collective (it raised its timeout), so it waits like rank 0: the silent node is the cause."""
    answers = [NodeAnswer(1, "node 1 (10.0.0.2)", None, "timed out")]
    own = [
        RankPosition(0, BACKWARD, epoch=0, batch=1, seconds=5.2),
        RankPosition(1, TRAINING_STEP, epoch=0, batch=1, seconds=6.2, in_collective=True),
    ]
    (line,) = timed_out(own, answers)
    assert line == (
        "a collective timed out with every rank of this node waiting (rank 0 in backward "
        "(gradient all-reduce) (epoch 0, batch 1, for 5.2 s); rank 1 in training_step, inside a "
        "collective (epoch 0, batch 1, for 6.2 s)): node 1 (10.0.0.2) does not answer (timed "
        "out): the machine, or the network to it, is down"
    )
    status = {"ranks": [{**dataclasses.asdict(p), "exit": None} for p in own]}
    assert positions_of(status) == own  # as another node's launcher receives it
