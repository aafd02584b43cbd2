"""A deepspeed fit beside a lock that a killed build left: one line, exit 2."""

from __future__ import annotations

import importlib.util

import pytest

from tests.helpers.command_env import cli_env


def make_lock(root, op="deepspeed_shm_comm"):
    (root / op).mkdir(parents=True)
    lock = root / op / "lock"
    lock.touch()
    return lock


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("deepspeed") is None, reason="deepspeed not installed")
def test_a_deepspeed_fit_beside_a_killed_builds_lock_stops_in_one_line(
    run_main, autoencoder_config, tmp_path
):
    extensions = tmp_path / "extensions"
    lock = make_lock(extensions)
    result = run_main(
        "fit",
        "-c",
        autoencoder_config,
        "--trainer.strategy",
        "deepspeed_stage_2",
        "--trainer.devices",
        "1",
        "--trainer.max_epochs",
        "1",
        env=cli_env(TORCH_EXTENSIONS_DIR=str(extensions)),
    )
    assert result.returncode == 2, result.stderr[-3000:]
    errors = [line for line in result.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1, result.stderr[-3000:]
    assert f"rm {lock}" in errors[0]
    assert "Traceback" not in result.stderr
