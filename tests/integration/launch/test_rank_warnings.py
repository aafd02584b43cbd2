"""A warning of two real ranks is shown once, by rank 0."""

from __future__ import annotations

import pytest

from tests.helpers.command_env import cli_env


@pytest.mark.slow  # starts ranks
@pytest.mark.distributed
@pytest.mark.timeout(300)
def test_an_epoch_level_log_without_sync_dist_under_ranks_is_warned_once(run_main):
    result = run_main(
        "fit",
        "--model=tests.helpers.mistakes.LogsEpochWithoutSync",
        "--trainer.accelerator=cpu",
        "--trainer.devices=2",
        "--trainer.max_epochs=2",
        "--trainer.num_sanity_val_steps=0",
        "--trainer.enable_checkpointing=false",
        env=cli_env(),  # the ranks import the model from tests/
    )
    assert result.returncode == 0, result.stderr
    said = [line for line in result.stderr.splitlines() if "sync_dist=True" in line]
    assert said == [
        "trainkit: warning: It is recommended to use `self.log('val_unsynced', ..., "
        "sync_dist=True)` when logging on epoch level in distributed setting to accumulate the "
        "metric across devices (without it, val_unsynced is rank 0's value alone)"
    ], result.stderr
