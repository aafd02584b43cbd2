"""``logger.experiment`` and custom loggers as Lightning programs write them:
``CSVLogger.experiment`` is a writer of the run's files, a logger defines ``name``/``version`` as
properties and wraps ``experiment`` in ``rank_zero_experiment``."""

from __future__ import annotations

import csv
import statistics
from pathlib import Path

import torch
import yaml
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from trainkit import CSVLogger, TensorBoardLogger, Trainer, TrainModule
from trainkit.loggers.logger import (
    DummyExperiment,
    DummyLogger,
    Logger,
    merge_dicts,
    rank_zero_experiment,
)
from trainkit.utilities import rank_zero_only


class Model(TrainModule):
    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.Linear(2, 1)
        self.experiments: list[object] = []

    def training_step(self, batch, batch_idx):
        loss = self.layer(batch[0]).pow(2).mean()
        self.log("loss", loss)
        return loss

    def on_train_epoch_end(self) -> None:
        # Lightning's GAN example: every logger's experiment, whatever the logger
        self.experiments = [logger.experiment for logger in self.loggers]

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def fit(tmp_path: Path, logger: object) -> Model:
    model = Model()
    Trainer(
        accelerator="cpu",
        devices=1,
        max_epochs=1,
        logger=logger,
        log_every_n_steps=1,
        enable_progress_bar=False,
        enable_checkpointing=False,
        default_root_dir=str(tmp_path),
    ).fit(model, DataLoader(TensorDataset(torch.randn(8, 2)), batch_size=2))
    return model


def rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="") as handle:
        return list(csv.DictReader(handle))


def test_every_folder_logger_has_an_experiment(tmp_path):
    model = fit(tmp_path, [TensorBoardLogger(), CSVLogger()])
    kinds = [type(experiment).__name__ for experiment in model.experiments]
    assert kinds == ["SummaryWriter", "ExperimentWriter"]


def test_the_csv_experiment_writes_metrics_and_hyperparameters(tmp_path):
    logger = CSVLogger(tmp_path)
    fit(tmp_path, logger)
    writer = logger.experiment
    assert writer.log_dir == logger.log_dir
    assert [row["step"] for row in rows(logger.metrics_file)] == ["0", "1", "2", "3"]
    writer.log_metrics({"extra": torch.tensor(0.5)}, step=9)
    writer.log_metrics({"loss": 1.0})
    writer.log_hparams({"lr": 0.1})
    writer.save()
    written = rows(Path(writer.metrics_file_path))
    # a new column, rows kept; columns sorted by name, as Lightning's
    assert list(written[0]) == ["epoch", "extra", "loss", "step"]
    assert [(row["step"], row["extra"], row["loss"]) for row in written[-2:]] == [
        ("9", "0.5", ""),
        ("1", "", "1.0"),  # without a step: the rows not yet saved, as Lightning's
    ]
    assert yaml.safe_load((Path(logger.log_dir) / "hparams.yaml").read_text()) == {"lr": 0.1}


class MyLogger(Logger):
    """The custom logger of Lightning's documentation."""

    def __init__(self) -> None:
        super().__init__()
        self.metrics: list[tuple[int, dict[str, float]]] = []
        self.created = 0

    @property
    def name(self) -> str:
        return "MyLogger"

    @property
    def version(self) -> str:
        return "0.1"

    @property
    @rank_zero_experiment
    def experiment(self) -> list[str]:
        self.created += 1
        return ["the run"]

    @rank_zero_only
    def log_hyperparams(self, params) -> None:
        pass

    @rank_zero_only
    def log_metrics(self, metrics, step) -> None:
        self.metrics.append((step, dict(metrics)))


def test_a_custom_logger_with_read_only_name_and_version(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    logger = MyLogger()
    model = fit(tmp_path, logger)
    assert [step for step, _ in logger.metrics] == [0, 1, 2, 3]
    assert model.experiments == [["the run"]] and logger.log_dir == str(Path("MyLogger", "0.1"))


def test_rank_zero_experiment_gives_other_ranks_a_dummy():
    logger = MyLogger()
    rank_zero_only.rank = 1
    try:
        experiment = logger.experiment
    finally:
        rank_zero_only.rank = 0
    assert isinstance(experiment, DummyExperiment) and logger.created == 0
    assert experiment.add_image("x", 1) is None and experiment[0].anything() is None
    assert logger.experiment == ["the run"]


def test_the_dummy_logger_takes_any_call(tmp_path):
    dummy = DummyLogger()
    dummy.log_metrics({"x": 1.0}, 0)
    assert dummy.finalize("success") is None and dummy.whatever(1, key=2) is None
    assert dummy[0] is dummy and isinstance(dummy.experiment, DummyExperiment)


def test_merge_dicts_aggregates_each_key():
    merged = merge_dicts(
        [
            {"a": 1.7, "b": 2.0, "c": 1, "d": {"d1": 1, "d3": 3}},
            {"a": 1.1, "b": 2.2, "v": 1, "d": {"d1": 2, "d2": 3}},
            {"a": 1.1, "v": 2.3, "d": {"d3": 3, "d4": {"d5": 1}}},
        ],
        {"a": statistics.mean, "v": max, "d": {"d1": sum}},
        min,
    )
    assert merged == {
        "a": 1.3, "b": 2.0, "c": 1, "v": 2.3, "d": {"d1": 3, "d2": 3, "d3": 3, "d4": {"d5": 1}},
    }  # fmt: skip
