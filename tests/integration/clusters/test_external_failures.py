"""Under an external launcher a failure is as plain as under trainkit's own: the failing rank
prints its traceback and a one-line "rank N failed: <cause>"; a peer that only lost its
connection says so in one line, without a second traceback."""

from __future__ import annotations

import time

import pytest

from tests.integration.clusters.conftest import cluster_config, launch, trainkit_command

pytestmark = [pytest.mark.slurm, pytest.mark.timeout(240)]


def test_srun_shows_the_failing_rank_and_labels_its_peers_follow_on_error(
    slurm, tmp_path, no_leftovers
):
    config = cluster_config(tmp_path, model="CrashingRegressor", crash_at=[2], crash_rank=1)
    started = time.monotonic()
    done = launch(
        ["srun", "-n", "2", *trainkit_command(config, tmp_path / "run")], tmp_path, slurm.env
    )
    output = done.stdout
    assert done.returncode == 1, output
    assert output.count("Traceback (most recent call last)") == 1, output
    assert "trainkit: rank 1 failed: RuntimeError: injected failure at step 2" in output, output
    assert "trainkit: rank 0: follow-on error, not the cause" in output, output
    assert time.monotonic() - started < 240, output  # nobody waits for the failed rank
