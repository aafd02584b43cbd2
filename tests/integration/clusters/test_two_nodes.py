"""Two nodes for real: two network namespaces on this machine, each a host with its own address
on a bridge (tests/integration/clusters/netns.py), so every byte between the nodes crosses a network
interface. trainkit's own launcher, torchrun and mpirun each run one job of 2 nodes x 2 ranks
across them and end with the weights of 1 node x 4 ranks and of one process given the whole
batch. Then the faults: a node's ranks killed, a node gone, a node started late, MASTER_PORT
taken on one node only, a rank of node 1 that hangs, and a preemption on one node.

The commands are docs/clusters.md's ("Two nodes"). Needs root for the namespaces (skips
without); runs in .ci/run, which has it."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import torch

from tests.integration.clusters.netns import Node, agent_env, nodes_or_skip
from tests.integration.clusters.two_nodes import (
    Launched,
    assert_trained_like_one_node_and_one_process,
    exact_config,
    finish,
    output,
    ranks_ran,
)
from tests.integration.reliability.runs import checkpoints
from trainkit import PREEMPTED_EXIT_CODE

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

PYTHON = sys.executable
TORCHRUN = str(Path(sys.executable).parent / "torchrun")
PORT = "29500"  # free: nothing else runs in the namespaces


@pytest.fixture(scope="module")
def nodes():
    with nodes_or_skip(2, tag="tn") as made:
        yield made


def trainkit_on(
    launched: Launched, node: Node, nodes: list[Node], config: Path, *options: str, **env: str
) -> subprocess.Popen:
    """trainkit's own launcher on ``node``: NODE_RANK, MASTER_ADDR of node 0, MASTER_PORT."""
    argv = [PYTHON, "-m", "trainkit", "fit", "-c", str(config), "--trainer.num_nodes", "2"]
    variables = {"NODE_RANK": str(node.index), "MASTER_ADDR": nodes[0].address, "MASTER_PORT": PORT}
    return launched.start(node, [*argv, *options], f"node{node.index}", **variables, **env)


def both_nodes(launched, nodes, config, *options, **env) -> list[subprocess.Popen]:
    return [trainkit_on(launched, node, nodes, config, *options, **env) for node in nodes]


def root_of(folder: Path) -> list[str]:
    return ["--trainer.default_root_dir", str(folder / "run")]


def one_rank_each(folder: Path, **model) -> Path:
    """The exact 4 steps with one rank per node (batch 8 each): the faults' subject is the
    nodes, and the weights are those of 4 ranks or of one process all the same."""
    return exact_config(folder, devices=1, batch_size=8, **model)


def wait_for(ready, what: str, procs: list[subprocess.Popen], timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while not ready():
        for proc in procs:
            assert proc.poll() is None, f"ended before {what}:\n{output(proc)}"
        assert time.monotonic() < deadline, f"no {what} within {timeout} s"
        time.sleep(0.05)


# ---- one job across two nodes, three launchers ----------------------------------------------------
def test_trainkits_launcher_on_two_nodes_trains_like_one_node_and_one_process(
    nodes, exact_references, tmp_path, launched
):
    config = exact_config(tmp_path)
    procs = both_nodes(launched, nodes, config, *root_of(tmp_path))
    assert [finish(proc) for proc in procs] == [0, 0], [output(p) for p in procs]
    assert ranks_ran(tmp_path) == {0: 0, 1: 0, 2: 1, 3: 1}
    assert_trained_like_one_node_and_one_process(tmp_path, exact_references)


def test_torchrun_on_two_nodes_trains_like_one_node_and_one_process(
    nodes, exact_references, tmp_path, launched
):
    """torchrun's c10d rendezvous. Where the host name resolves to a loopback address (as in
    these namespaces, in containers, Debian's 127.0.1.1) torchrun needs each node's address
    (--local-addr) and, on the rendezvous node, is_host=1."""
    config = exact_config(tmp_path)
    procs = []
    for node in nodes:
        host = ["--rdzv-conf", "is_host=1"] if node.index == 0 else []
        argv = [
            TORCHRUN,
            "--nnodes", "2", "--nproc-per-node", "2",
            "--rdzv-backend", "c10d", "--rdzv-endpoint", f"{nodes[0].address}:29400",
            "--rdzv-id", "two-nodes", "--local-addr", node.address, *host,
            "-m", "trainkit", "fit", "-c", str(config),
            "--trainer.devices", "2", "--trainer.num_nodes", "2", *root_of(tmp_path),
        ]  # fmt: skip
        # TMPDIR: torchrun's own temp folder, in the test's
        procs.append(launched.start(node, argv, f"torchrun{node.index}", TMPDIR=str(tmp_path)))
    assert [finish(proc) for proc in procs] == [0, 0], [output(p) for p in procs]
    assert ranks_ran(tmp_path) == {0: 0, 1: 0, 2: 1, 3: 1}
    assert_trained_like_one_node_and_one_process(tmp_path, exact_references)


def test_mpirun_across_two_nodes_trains_like_one_node_and_one_process(
    nodes, exact_references, tmp_path, launched
):
    """OpenMPI reaches node 1 through a launch agent in the manner of ssh (plm_rsh_agent) that
    enters node 1's namespace; its daemons talk over the nodes' network (oob_tcp_if_include)."""
    mpirun = subprocess.run(["which", "mpirun"], capture_output=True, text=True).stdout.strip()
    if not mpirun:
        pytest.skip("mpirun is not installed: apt-get install openmpi-bin")
    config = exact_config(tmp_path)
    hosts = ",".join(f"{node.address}:2" for node in nodes)
    argv = [
        mpirun, "--allow-run-as-root", "--oversubscribe", "-np", "4", "--host", hosts,
        "--mca", "plm_rsh_agent", f"{PYTHON} -m tests.integration.clusters.netns",
        "--mca", "oob_tcp_if_include", f"{nodes[0].address}/24",
        "-x", f"MASTER_ADDR={nodes[0].address}", "-x", "PYTHONPATH",
        PYTHON, "-m", "trainkit", "fit", "-c", str(config),
        "--trainer.devices", "2", "--trainer.num_nodes", "2", *root_of(tmp_path),
    ]  # fmt: skip
    proc = launched.start(nodes[0], argv, "mpirun", **agent_env(nodes))
    assert finish(proc) == 0, output(proc)
    assert ranks_ran(tmp_path) == {0: 0, 1: 0, 2: 1, 3: 1}
    assert_trained_like_one_node_and_one_process(tmp_path, exact_references)


# ---- faults ------------------------------------------------------------------------------------
def slow_run(launched, nodes, folder, step_s=1.0, devices=1, **env):
    """Both nodes training steps of ``step_s`` with ``devices`` ranks each; returns them, once
    every rank is at the end of its first step, and the config."""
    started = folder / "started"
    slow = dict(sleep_s=step_s, touch_file=str(started), touch_after_steps=0)
    config = exact_config(folder, devices, 16 // (2 * devices), **slow)
    procs = both_nodes(launched, nodes, config, *root_of(folder), **env)
    wait_for(started.exists, "a second step", procs)
    return procs, config


def ranks_of(launcher: subprocess.Popen) -> list[psutil.Process]:
    return [p for p in psutil.Process(launcher.pid).children() if "LOCAL_RANK" in p.environ()]


@pytest.mark.parametrize("lost", ["ranks", "node", "network"])
def test_a_node_that_dies_ends_the_other_naming_it(nodes, tmp_path, launched, lost):
    """``ranks``: node 1's ranks are SIGKILLed, its launcher sees it; ``node``: node 1's
    launcher and ranks all at once (trainkit killed there); ``network``: node 1 is cut off, no
    connection closes, so node 0's ranks wait out their collective timeout (4 s) first (two
    ranks a node there: they may be caught waiting at one point or at two). How soon node 0
    ends: scripts/bench_nodes.py."""
    timeout = 4.0 if lost == "network" else 0.0
    env = {"TRAINKIT_COLLECTIVE_TIMEOUT": f"{timeout:g}"} if timeout else {}
    devices = 2 if lost == "network" else 1
    (node0, node1), _ = slow_run(launched, nodes, tmp_path, devices=devices, **env)
    if lost == "ranks":
        for rank in ranks_of(node1):
            rank.kill()
    elif lost == "node":
        os.killpg(node1.pid, signal.SIGKILL)
    else:
        nodes[1].unplug()
    try:
        code = finish(node0, 120)
    finally:
        nodes[1].plug()
    said = output(node0)
    assert code != 0, said
    node1_name = rf"node 1 \(\S+, {re.escape(nodes[1].address)}\)"
    if lost == "ranks":
        assert re.search(rf"the job failed on {node1_name}: rank 1 was killed by SIGKILL", said)
        assert finish(node1) == 128 + signal.SIGKILL
        assert re.search(r"trainkit: rank 1 was killed by SIGKILL", output(node1))
    elif lost == "node":
        assert re.search(
            rf"{node1_name} does not answer \(Connection refused\): its trainkit launcher is gone",
            said,
        ), said
    else:
        # both ranks, at one point or at two (the cut can come as one has left the all-reduce)
        waited = (
            r"a collective timed out with every rank of this node waiting "
            r"\((?:ranks 0-1 in .*|rank [01] in .*; rank [01] in .*)\)"
        )
        gone = rf"{node1_name} does not answer \(timed out\): the machine, or the network to it"
        assert re.search(rf"{waited}: {gone}, is down", said), said
        assert "its node's launcher names it" not in said


def test_a_node_started_late_is_waited_for(nodes, exact_references, tmp_path, launched):
    """Node 1 first; node 0 (rank 0's, whose launcher answers on MASTER_PORT) only once node
    1 has said that it waits for it."""
    config = one_rank_each(tmp_path)
    node1 = trainkit_on(launched, nodes[1], nodes, config, *root_of(tmp_path))
    waiting = f"waiting for node 0 at {nodes[0].address}:{PORT}"
    wait_for(lambda: waiting in output(node1), "the wait for node 0", [node1])
    node0 = trainkit_on(launched, nodes[0], nodes, config, *root_of(tmp_path))
    assert [finish(node0), finish(node1)] == [0, 0], [output(node0), output(node1)]
    assert_trained_like_one_node_and_one_process(tmp_path, exact_references)


def hold(launched: Launched, node: Node, folder: Path) -> None:
    """MASTER_PORT taken on ``node`` by a program that accepts connections and never answers."""
    ready = folder / "held"
    holder = launched.start(
        node,
        [PYTHON, "-m", "tests.integration.clusters.hold_port", str(ready), f"port={PORT}"],
        "holder",
    )
    wait_for(ready.exists, "the port held", [holder], timeout=60)


def test_master_port_taken_on_node_0_is_one_line_on_each_node(nodes, tmp_path, launched):
    hold(launched, nodes[0], tmp_path)
    node0, node1 = both_nodes(launched, nodes, one_rank_each(tmp_path), *root_of(tmp_path))
    assert finish(node0, 120) == 2 and finish(node1, 120) == 2
    for proc, expected in (
        (node0, f"MASTER_PORT {PORT}; expected a free port on {nodes[0].address}; Address already in use"),
        (node1, f"MASTER_PORT {PORT}; expected trainkit's launcher of node 0 listening on {nodes[0].address}:{PORT}; the program there accepted the connection but never answered"),
    ):  # fmt: skip
        said = output(proc)
        errors = [line for line in said.splitlines() if line.startswith("trainkit: error:")]
        assert len(errors) == 1 and expected in errors[0], said
        assert "Traceback" not in said


def test_master_port_taken_on_node_1_only_does_not_matter(
    nodes, exact_references, tmp_path, launched
):
    """Only node 0 listens on MASTER_PORT: the port is checked there, not on every node."""
    hold(launched, nodes[1], tmp_path)
    procs = both_nodes(launched, nodes, one_rank_each(tmp_path), *root_of(tmp_path))
    assert [finish(proc) for proc in procs] == [0, 0], [output(p) for p in procs]
    assert_trained_like_one_node_and_one_process(tmp_path, exact_references)


def test_a_hung_rank_on_node_1_is_named_from_node_0_and_both_nodes_end(nodes, tmp_path, launched):
    """One rank per node: node 1's rank sleeps in its training_step, so nothing on node 1 times
    out. Node 0's rank does; its launcher asks node 1's, names the late rank, and tells node 1
    the job failed, which stops the sleeping rank."""
    fault = tmp_path / "fault_time"
    config = exact_config(tmp_path, devices=1, fault="hang", fault_rank=1, fault_file=str(fault))
    node0, node1 = both_nodes(
        launched, nodes, config, *root_of(tmp_path), TRAINKIT_COLLECTIVE_TIMEOUT="4"
    )
    assert finish(node0, 180) != 0
    assert finish(node1, 60) != 0
    assert fault.exists(), output(node0)  # the rank hung where it was told to
    said = output(node0)
    node1_name = rf"node 1 \(\S+, {re.escape(nodes[1].address)}\)"
    late = rf"a collective timed out: late: rank 1 in training_step \(epoch 0, batch 2, for [\d.]+ s\) on {node1_name}; waiting: rank 0 in backward"
    assert re.search(late, said), said
    assert "the late rank is on another node" not in said
    assert re.search(
        r"the job failed on node 0 \(\S+, 10\.213\.0\.1\): rank 0 failed", output(node1)
    )


def test_preempting_node_1_saves_once_and_resumes_exactly_on_two_nodes(
    nodes, exact_references, tmp_path, launched
):
    """Signalled in the second of 4 steps, the ranks agree to stop two steps later at most
    (docs/reliability.md): 2 s steps leave the test 2 s to send the signal."""
    procs, config = slow_run(launched, nodes, tmp_path, step_s=2.0)
    for rank in ranks_of(procs[1]):
        rank.send_signal(signal.SIGTERM)
    assert [finish(proc) for proc in procs] == [PREEMPTED_EXIT_CODE] * 2
    said = "".join(output(proc) for proc in procs)
    assert said.count("; saved ") == 1, said
    last = checkpoints(tmp_path / "run")["last.ckpt"]
    assert 0 < torch.load(last, weights_only=True)["loops"]["batches_in_epoch"] < 4  # mid-epoch
    resumed = both_nodes(launched, nodes, config, *root_of(tmp_path), "--ckpt_path", "last")
    assert [finish(proc) for proc in resumed] == [0, 0], [output(p) for p in resumed]
    assert_trained_like_one_node_and_one_process(tmp_path, exact_references)
