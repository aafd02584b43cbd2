"""A Kubeflow PyTorchJob for real, as its pods would run it: two network namespaces stand for
the Master and the Worker pod (tests/integration/clusters/netns.py), and each pod's process starts with only
what Kubernetes and the training operator give it (KUBERNETES_*, MASTER_ADDR = the Master pod's
address, MASTER_PORT, WORLD_SIZE, RANK). trainkit starts no process: each pod is one rank on a
node of its own (trainer.devices 1, trainer.num_nodes 2), and the job ends with the weights of
one process given the whole batch, bit for bit. The manifest is docs/clusters.md's ("Kubernetes").

Needs root for the namespaces (skips without)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from tests.helpers.command_env import REPO
from tests.integration.clusters.netns import Node, nodes_or_skip
from tests.integration.clusters.two_nodes import (
    Launched,
    assert_trained_like_one_node_and_one_process,
    exact_config,
    finish,
    output,
)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

PORT = "23456"  # the training operator's default MASTER_PORT


@pytest.fixture(scope="module")
def pods():
    with nodes_or_skip(2, tag="kf") as made:
        yield made


def operator_env(pod: Node, master: Node, **changed: str) -> dict[str, str]:
    """All a PyTorchJob pod's process gets: Kubernetes' service variables, the operator's
    rendezvous and ranks, a PATH and a HOME (and the repository, as an image would hold it)."""
    return {
        "KUBERNETES_SERVICE_HOST": "10.96.0.1",
        "KUBERNETES_SERVICE_PORT": "443",
        "KUBERNETES_PORT": "tcp://10.96.0.1:443",
        "MASTER_ADDR": master.address,
        "MASTER_PORT": PORT,
        "WORLD_SIZE": "2",
        "RANK": str(pod.index),
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/root"),
        "PYTHONPATH": str(REPO),
        **changed,
    }


def pod_command(config: Path, root: Path, *options: str) -> list[str]:
    """The container's command of docs/clusters.md's manifest."""
    return [
        sys.executable, "-m", "trainkit", "fit", "-c", str(config),
        "--trainer.devices", "1", "--trainer.num_nodes", "2",
        "--trainer.default_root_dir", str(root), *options,
    ]  # fmt: skip


def test_a_pytorchjob_of_two_pods_trains_like_one_process(
    pods, exact_references, tmp_path, launched: Launched
):
    config = exact_config(tmp_path, devices=1, batch_size=8)  # 2 pods x 8 = one batch of 16
    master = pods[0]
    procs = [
        launched.start_with(pod, pod_command(config, tmp_path / "run"), f"pod{pod.index}",
                            operator_env(pod, master))
        for pod in pods
    ]  # fmt: skip
    assert [finish(proc) for proc in procs] == [0, 0], [output(p) for p in procs]
    records = [json.loads(p.read_text()) for p in (tmp_path / "ranks").glob("rank*.json")]
    assert sorted((r["global_rank"], r["node_rank"], r["world_size"]) for r in records) == [
        (0, 0, 2),
        (1, 1, 2),
    ]  # one rank per pod, the pod its node: no process of trainkit's own
    assert_trained_like_one_node_and_one_process(tmp_path, exact_references)


def test_a_pod_asked_for_another_world_says_so_in_one_line(pods, tmp_path, launched: Launched):
    """The config's world against the PyTorchJob's, before anything trains (exit 2 in every
    pod); the Master pod (rank 0) says it, once for the job, as under torchrun."""
    config = exact_config(tmp_path, devices=1, batch_size=8)
    wrong = pod_command(config, tmp_path / "run", "--trainer.num_nodes", "3")
    procs = [
        launched.start_with(pod, wrong, f"pod{pod.index}", operator_env(pod, pods[0]))
        for pod in pods
    ]
    assert [finish(proc) for proc in procs] == [2, 2], [output(proc) for proc in procs]
    said = [
        [line for line in output(proc).splitlines() if line.startswith("trainkit: error:")]
        for proc in procs
    ]
    assert said == [
        [
            "trainkit: error: trainer.num_nodes 3; expected 2, the nodes the PyTorchJob runs on "
            "(WORLD_SIZE=2); set trainer.num_nodes: 2, or start a PyTorchJob of 3 pods "
            "(Master: 1 replica, Worker: the others)"
        ],
        [],
    ], [output(proc) for proc in procs]
