"""LambdaCallback, BasePredictionWriter and DeviceStatsMonitor: Lightning's callbacks that a
program builds on, each doing its job in a real run."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
import torch
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

from tests.helpers.models import Regression, regression_loader
from trainkit import CSVLogger
from trainkit.callbacks import BasePredictionWriter, DeviceStatsMonitor, LambdaCallback
from trainkit.errors import ConfigError, MisconfigurationError


def test_lambda_callback_calls_the_functions_given(make_trainer):
    seen: list[tuple[str, object]] = []
    callback = LambdaCallback(
        on_fit_start=lambda trainer, pl_module: seen.append(("fit_start", trainer.global_step)),
        on_train_batch_end=lambda trainer, pl_module, outputs, batch, batch_idx: seen.append(
            ("batch_end", batch_idx)
        ),
        setup=lambda trainer, pl_module, stage: seen.append(("setup", stage)),
    )
    make_trainer(max_steps=2, callbacks=[callback]).fit(Regression(), regression_loader())
    assert seen == [("setup", "fit"), ("fit_start", 0), ("batch_end", 0), ("batch_end", 1)]
    with pytest.raises(TypeError, match="on_fit_end=3"):
        LambdaCallback(on_fit_end=3)  # type: ignore[arg-type]


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


def test_device_stats_reach_the_loggers(make_trainer, tmp_path):
    logger = CSVLogger(tmp_path)
    trainer = make_trainer(
        max_steps=4,
        logger=logger,
        log_every_n_steps=2,
        callbacks=[DeviceStatsMonitor(cpu_stats=True)],
    )
    trainer.fit(Regression(), regression_loader())
    with (Path(logger.log_dir) / "metrics.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    column = "DeviceStatsMonitor.on_train_batch_start/cpu_percent"
    logged = [row["step"] for row in rows if row.get(column)]
    assert logged and all(int(step) % 2 == 0 for step in logged)
    assert any(row.get("DeviceStatsMonitor.on_train_batch_end/cpu_vm_percent") for row in rows)


def test_device_stats_need_a_logger(make_trainer):
    with pytest.raises(MisconfigurationError, match="needs a logger"):
        make_trainer(max_steps=1, callbacks=[DeviceStatsMonitor()]).fit(
            Regression(), regression_loader()
        )
