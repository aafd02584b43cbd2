"""TRAINKIT_RANK_PREFIX: each rank's lines start with ``[rank R]``, two real ranks."""

from __future__ import annotations

import pytest

from tests.helpers.command_env import REPO, cli_env

CONFIG = str(REPO / "configs" / "autoencoder.yaml")


@pytest.mark.slow  # starts ranks
@pytest.mark.distributed
@pytest.mark.timeout(300)
def test_trainkit_rank_prefix_marks_the_lines_of_each_rank(run_main):
    result = run_main(
        "fit",
        "-c",
        CONFIG,
        "--trainer.devices=2",
        "--trainer.max_epochs=1",
        "--trainer.limit_train_batches=2",
        "--trainer.limit_val_batches=1",
        "--model",
        "tests.helpers.printing.PrintsItsRank",
        env=cli_env(TRAINKIT_RANK_PREFIX="1"),
    )
    assert result.returncode == 0, result.stderr
    printed = [line for line in result.stdout.splitlines() if "hello from rank" in line]
    assert sorted(printed) == ["[rank 0] hello from rank 0", "[rank 1] hello from rank 1"]
