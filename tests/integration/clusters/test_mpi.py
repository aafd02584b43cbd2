"""OpenMPI's mpirun: ranks know their node (OMPI_COMM_WORLD_NODE_RANK is a rank within a node,
not the node), train to the weights of trainkit's own launcher, write no terminal escapes into
mpirun's captured output, and a rendezvous port that is taken is one line, not torch's error."""

from __future__ import annotations

import json
import socket

import pytest

from tests.helpers.command_env import cli_env
from tests.integration.clusters.conftest import cluster_config, launch, trainkit_command
from tests.integration.reliability.runs import assert_same_weights, checkpoints

pytestmark = [pytest.mark.mpi, pytest.mark.timeout(240)]


def mpirun_command(mpirun: str, *options: str) -> list[str]:
    return [mpirun, "--allow-run-as-root", "--oversubscribe", "-np", "2", *options]


def test_mpirun_trains_like_trainkits_launcher_on_node_0_without_escapes(
    mpirun, tmp_path, straight_run, no_leftovers
):
    config = cluster_config(tmp_path)
    command = trainkit_command(config, tmp_path / "run", "--trainer.enable_progress_bar", "true")
    done = launch(mpirun_command(mpirun, *command), tmp_path, cli_env())
    assert done.returncode == 0, done.stdout
    assert "\x1b[" not in done.stdout, done.stdout  # mpirun gives ranks a pty; no live bars
    assert "training configuration" in done.stdout  # the plain startup table instead
    records = [json.loads((tmp_path / "ranks" / f"rank{r}.json").read_text()) for r in (0, 1)]
    assert [(r["local_rank"], r["node_rank"]) for r in records] == [(0, 0), (1, 0)]
    assert_same_weights(straight_run(2), checkpoints(tmp_path / "run")["last.ckpt"])


def test_a_taken_master_port_is_one_line_naming_it(mpirun, tmp_path, no_leftovers):
    config = cluster_config(tmp_path)
    with socket.socket() as taken:
        taken.bind(("", 0))
        taken.listen()
        port = taken.getsockname()[1]
        command = trainkit_command(config, tmp_path / "run")
        done = launch(mpirun_command(mpirun, *command), tmp_path, cli_env(MASTER_PORT=str(port)))
    errors = [line for line in done.stdout.splitlines() if line.startswith("trainkit: error:")]
    assert done.returncode != 0, done.stdout
    assert len(errors) == 1 and f"MASTER_PORT {port}; expected a free port" in errors[0], errors
    assert "unset MASTER_PORT" in errors[0] and "Traceback" not in done.stdout, done.stdout
