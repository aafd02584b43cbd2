"""A warning of two real ranks is shown once, by rank 0."""

from __future__ import annotations

import sys

import pytest

from tests.helpers.command_env import REPO
from trainkit.cli import main

CONFIG = str(REPO / "configs" / "autoencoder.yaml")


SHORT = [
    "--trainer.max_epochs=1",
    "--trainer.limit_train_batches=4",
    "--trainer.limit_val_batches=1",
]


@pytest.fixture
def fit(tmp_path, capsys, monkeypatch):
    """``trainkit fit -c autoencoder.yaml ARGS`` in-process: (exit code, stdout, stderr lines)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["trainkit"])

    def run(*args: str) -> tuple[int, str, list[str]]:
        code = main(["fit", "-c", CONFIG, *SHORT, "--trainer.default_root_dir=run", *args])
        out, err = capsys.readouterr()
        return code, out, [line for line in err.splitlines() if line.strip()]

    return run


@pytest.mark.slow  # starts ranks
@pytest.mark.distributed
@pytest.mark.timeout(300)
def test_an_epoch_level_log_without_sync_dist_under_ranks_is_warned_once(run_cli):
    result = run_cli(
        "fit",
        "--model=tests.helpers.mistakes.LogsEpochWithoutSync",
        "--trainer.accelerator=cpu",
        "--trainer.devices=2",
        "--trainer.max_epochs=2",
        "--trainer.num_sanity_val_steps=0",
        "--trainer.enable_checkpointing=false",
        timeout=480,
    )
    assert result.returncode == 0, result.stderr
    said = [line for line in result.stderr.splitlines() if "sync_dist=True" in line]
    assert said == [
        "trainkit: warning: It is recommended to use `self.log('val_unsynced', ..., "
        "sync_dist=True)` when logging on epoch level in distributed setting to accumulate the "
        "metric across devices (without it, val_unsynced is rank 0's value alone)"
    ], result.stderr
