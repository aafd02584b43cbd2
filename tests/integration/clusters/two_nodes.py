"""What the two-node tests (test_two_nodes*.py, test_kubeflow.py) train and compare: 4 exact steps
of a small regressor, whose weights do not depend on how its batch is split over ranks and nodes;
and the processes they start inside the nodes."""

from __future__ import annotations

import json
import os
import signal
import subprocess
from pathlib import Path

import pytest
import torch
import yaml

from tests.helpers.command_env import cli_env
from tests.helpers.in_process import run_main
from tests.integration.clusters.netns import Node
from tests.integration.reliability.runs import assert_same_weights, checkpoints, write_config


def exact_config(folder: Path, devices: int = 2, batch_size: int = 4, **model) -> Path:
    """4 steps of the exact regressor (tests.integration.clusters.models) at ``batch_size`` per rank,
    each rank's record under ``folder/ranks``."""
    folder.mkdir(parents=True, exist_ok=True)
    path = write_config(folder, devices=devices)
    config = yaml.safe_load(path.read_text())
    config["model"] = {
        "class_path": "tests.integration.clusters.models.ExactRegressor",
        "init_args": model,
    }
    config["data"] = {
        "class_path": "tests.integration.clusters.models.ExactData",
        "init_args": {"batch_size": batch_size},
    }
    config["trainer"]["max_epochs"] = 1
    config["trainer"]["callbacks"].append(
        {
            "class_path": "tests.integration.clusters.models.RankRecorder",
            "init_args": {"folder": str(folder / "ranks")},
        }
    )
    path.write_text(yaml.safe_dump(config))
    return path


def reference_runs(folder: Path) -> dict[str, Path]:
    """last.ckpt of 1 node x 4 ranks (batch 4 each, over 127.0.0.1) and of one process with
    batch 16 ("1x4", "1x1"): the weights every two-node job must end with. Run from this
    process (``trainkit.cli.main``: the one process trains here, the 4 ranks are launched from
    here); the nodes' jobs are the processes under test."""
    done = {}
    for name, devices, batch in (("1x4", 4, 4), ("1x1", 1, 16)):
        config = exact_config(folder / name, devices, batch)
        root = folder / name / "run"
        args = ("fit", "-c", str(config), "--trainer.default_root_dir", str(root))
        result = run_main(args, folder / name, read_output=lambda: ("", ""))
        assert result.returncode == 0, f"the {name} reference run failed (see the captured output)"
        done[name] = checkpoints(root)["last.ckpt"]
    assert_same_weights(done["1x4"], done["1x1"])  # the model's promise, before any node
    return done


def ranks_ran(folder: Path) -> dict[int, int]:
    """Each global rank's node, as the ranks of a world of 4 recorded it."""
    records = [json.loads(p.read_text()) for p in (folder / "ranks").glob("rank*.json")]
    return {r["global_rank"]: r["node_rank"] for r in records if r["world_size"] == 4}


def assert_trained_like_one_node_and_one_process(folder: Path, references: dict[str, Path]):
    """The run under ``folder/run`` took the 4 steps and ended with the references' weights,
    bit for bit."""
    last = checkpoints(folder / "run")["last.ckpt"]
    assert torch.load(last, weights_only=True)["global_step"] == 4
    assert_same_weights(references["1x4"], last)
    assert_same_weights(references["1x1"], last)


class Launched:
    """Processes started inside the nodes, each the leader of its own process group (its ranks
    join it), with its output in a file; all killed at the end of the test."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.procs: list[subprocess.Popen] = []

    def start(self, node: Node, argv: list[str], name: str, **env: str) -> subprocess.Popen:
        """``argv`` inside ``node`` with a test command's environment and ``env``."""
        return self.start_with(node, argv, name, cli_env(**env))

    def start_with(
        self, node: Node, argv: list[str], name: str, environment: dict[str, str]
    ) -> subprocess.Popen:
        """``argv`` inside ``node`` with exactly ``environment`` (as a pod gets it)."""
        path = self.folder / f"{name}-{len(self.procs)}.log"
        log = path.open("w")
        proc = subprocess.Popen(
            node.command(argv),
            cwd=self.folder,
            env=environment,
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        proc.log = path  # type: ignore[attr-defined]
        self.procs.append(proc)
        return proc

    def stop(self) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def output(proc: subprocess.Popen) -> str:
    return proc.log.read_text()  # type: ignore[attr-defined]


def finish(proc: subprocess.Popen, timeout: float = 300) -> int:
    try:
        return proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        pytest.fail(f"still running after {timeout} s:\n{output(proc)}")
