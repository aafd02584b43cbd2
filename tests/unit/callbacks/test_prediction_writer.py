"""BasePredictionWriter: each batch's dataset indices, in the order of the sampler."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

from tests.helpers.models import Regression
from trainkit.callbacks import BasePredictionWriter
from trainkit.errors import ConfigError


class Doubler(Regression):
    def predict_step(self, batch, batch_idx, dataloader_idx=0):
        return batch[0] * 2


class Collects(BasePredictionWriter):
    def __init__(self, write_interval: str) -> None:
        super().__init__(write_interval)  # type: ignore[arg-type]
        self.batches: list[tuple[list[int], int]] = []
        self.epoch: tuple[object, object] | None = None

    def write_on_batch_end(
        self, trainer, pl_module, prediction, batch_indices, batch, batch_idx, dataloader_idx
    ):
        self.batches.append((list(batch_indices), dataloader_idx))
        assert torch.equal(prediction, batch[0] * 2)

    def write_on_epoch_end(self, trainer, pl_module, predictions, batch_indices):
        self.epoch = (predictions, batch_indices)


def numbered(n: int, batch_size: int, sampler=None) -> DataLoader:
    rows = torch.arange(n, dtype=torch.float32).unsqueeze(1)
    return DataLoader(TensorDataset(rows), batch_size=batch_size, sampler=sampler)


def test_a_prediction_writer_gets_each_batchs_dataset_indices(make_trainer):
    writer = Collects("batch_and_epoch")
    trainer = make_trainer(callbacks=[writer])
    returned = trainer.predict(Doubler(), numbered(5, 2))
    assert writer.batches == [([0, 1], 0), ([2, 3], 0), ([4], 0)]
    assert writer.epoch is not None
    predictions, indices = writer.epoch
    assert predictions == returned and indices == [[[0, 1], [2, 3], [4]]]
    assert trainer.predict_loop.predictions == returned


def test_indices_follow_the_sampler_so_ranks_can_be_merged(make_trainer):
    """What rank 1 of 2 writes: its half of the rows, named by their dataset indices."""
    writer = Collects("epoch")
    sampler = DistributedSampler(range(6), num_replicas=2, rank=1, shuffle=False)
    make_trainer(callbacks=[writer]).predict(Doubler(), [numbered(6, 2, sampler), numbered(2, 2)])
    assert writer.epoch is not None and not writer.batches
    predictions, indices = writer.epoch
    assert indices == [[[1, 3], [5]], [[0, 1]]]
    assert [p.squeeze(1).tolist() for p in predictions[0]] == [[2.0, 6.0], [10.0]]


def test_write_interval_is_checked():
    with pytest.raises(ConfigError, match="'sometimes'"):
        Collects("sometimes")
