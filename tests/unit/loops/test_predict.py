"""Predict gives every sample of the dataset to exactly one rank (no padding repeats), and an
epoch-end prediction writer receives every prediction even when none is returned."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from trainkit import Trainer
from trainkit.callbacks import BasePredictionWriter
from trainkit.data import UnpaddedDistributedSampler, prepare_loader
from trainkit.demos.boring_classes import BoringModel


@pytest.mark.parametrize(("samples", "ranks"), [(22, 4), (8, 4), (3, 2), (1, 3)])
def test_each_sample_goes_to_one_rank_without_padding(samples, ranks):
    shares = [
        list(UnpaddedDistributedSampler(range(samples), num_replicas=ranks, rank=r, shuffle=False))
        for r in range(ranks)
    ]
    assert sorted(i for share in shares for i in share) == list(range(samples))
    assert [len(s) for s in shares] == [
        len(UnpaddedDistributedSampler(range(samples), num_replicas=ranks, rank=r))
        for r in range(ranks)
    ]


def test_predict_loaders_are_unpadded_and_evaluation_loaders_padded_as_lightning():
    loader = DataLoader(TensorDataset(torch.zeros(10, 1)), batch_size=4)
    kwargs = {"num_replicas": 4, "rank": 3}
    predict = prepare_loader(
        loader, kwargs, train=False, use_distributed_sampler=True, padded=False
    )
    evaluate = prepare_loader(loader, kwargs, train=False, use_distributed_sampler=True)
    assert list(predict.sampler) == [3, 7]
    assert list(evaluate.sampler) == [3, 7, 1]  # padded with a repeat of the first samples


class KeepsEpoch(BasePredictionWriter):
    def __init__(self) -> None:
        super().__init__("epoch")
        self.written: list = []

    def write_on_epoch_end(self, trainer, pl_module, predictions, batch_indices) -> None:
        self.written = [list(predictions), batch_indices]


def test_an_epoch_writer_gets_every_prediction_when_none_is_returned(tmp_path):
    writer = KeepsEpoch()
    trainer = Trainer(
        accelerator="cpu",
        logger=False,
        enable_progress_bar=False,
        default_root_dir=str(tmp_path),
        callbacks=[writer],
    )
    model = BoringModel()
    assert trainer.predict(model, model.predict_dataloader(), return_predictions=False) is None
    predictions, indices = writer.written
    assert len(predictions) == len(model.predict_dataloader())
    assert [i for batch in indices[0] for i in batch] == list(range(64))  # batches of 1
