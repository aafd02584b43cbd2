"""Resuming on another number of ranks: the interrupted epoch goes on after the samples the saved
ranks trained; deepspeed, whose optimizer state is split per rank, says it cannot."""

from __future__ import annotations

import pytest

from trainkit.checkpoint.files import CheckpointError
from trainkit.checkpoint.world_change import world_change


@pytest.mark.parametrize(
    ("saved", "now", "expected"),
    [
        # (ranks, batch per rank, batches done) -> (ranks, batch per rank): (skip, trained again)
        ((2, 4, 4), (1, 4), (8, 0)),  # the 32 samples of 2 ranks are 8 batches of one process
        ((2, 4, 3), (4, 4), (1, 8)),  # 24 samples: one global batch of 16, 8 trained again
        ((2, 8, 3), (4, 4), (3, 0)),  # an effective batch of 16 kept: the same batch count
        ((4, 4, 5), (2, 4), (10, 0)),
        ((2, None, 3), (4, 4), (1, 2)),  # a loader without a fixed batch size: counted in batches
    ],
)
def test_the_interrupted_epoch_goes_on_after_the_samples_already_trained(saved, now, expected):
    (saved_world, saved_batch, done), (world, batch) = saved, now
    change = world_change(saved_world, saved_batch, done, world, batch)
    assert (change.skip, change.retrained) == expected


def test_the_user_is_told_what_carried_over():
    change = world_change(2, 4, 4, 1, 4)
    assert change.describe(epoch=1) == (
        "trainkit: the checkpoint was saved by 2 rank(s) and resumes on 1: weights and optimizer "
        "state carry over; epoch 1 goes on after the 32 samples it had trained (8 batches per "
        "rank skipped, 0 trained again)"
    )
    at_an_epoch_end = world_change(2, 4, 0, 4, 4)
    assert at_an_epoch_end.skip == 0 and at_an_epoch_end.describe(epoch=2).endswith("carry over")


def test_deepspeed_refuses_optimizer_partitions_of_another_world_size():
    from trainkit.strategies.deepspeed import DeepSpeedStrategy

    strategy = DeepSpeedStrategy.preset("deepspeed_stage_2")  # one process, not connected
    with pytest.raises(
        CheckpointError, match=r"partitions of 2 deepspeed rank\(s\), this run has 1"
    ):
        strategy.load_optimizer_state_dict(None, {"per_rank": [b"rank 0", b"rank 1"]})
