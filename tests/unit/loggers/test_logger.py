"""Loggers take Lightning's constructor arguments: name=None, version, prefix, sub_dir,
default_hp_metric, log_graph (TensorBoard), flush_logs_every_n_steps (CSV); and YAML configs
name them by short class name."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
import torch
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

from tests.helpers.models import Regression, regression_loader
from trainkit import CSVLogger, TensorBoardLogger, Trainer


def fit_with(tmp_path, *loggers, module=None, epochs=1):
    trainer = Trainer(
        accelerator="cpu",
        max_epochs=epochs,
        log_every_n_steps=1,
        default_root_dir=str(tmp_path),
        logger=list(loggers),
        enable_progress_bar=False,
        enable_checkpointing=False,
    )
    trainer.fit(module or Regression(), regression_loader())
    return trainer


def scalars(folder: str) -> dict[str, list[float]]:
    events = EventAccumulator(folder)
    events.Reload()
    return {tag: [e.value for e in events.Scalars(tag)] for tag in events.Tags()["scalars"]}


def test_name_none_puts_versions_straight_into_save_dir(tmp_path):
    trainer = fit_with(tmp_path, TensorBoardLogger(tmp_path / "tb", name=None))
    assert Path(trainer.log_dir) == tmp_path / "tb" / "version_0"


def test_prefix_sub_dir_and_the_hp_metric_placeholder(tmp_path):
    tb = TensorBoardLogger(tmp_path, name="exp", version="run-a", prefix="stage1", sub_dir="tb")
    fit_with(tmp_path, tb)
    assert tb.log_dir == str(tmp_path / "exp" / "run-a" / "tb")
    tags = scalars(tb.log_dir)
    assert "stage1-train_loss" in tags and "train_loss" not in tags
    assert tags["hp_metric"] == [-1.0]
    quiet = TensorBoardLogger(tmp_path, name="exp2", default_hp_metric=False)
    fit_with(tmp_path, quiet)
    assert "hp_metric" not in scalars(quiet.log_dir)


def test_csv_prefix_and_flushing_before_the_epoch_ends(tmp_path):
    flushed = []

    class Watch(Regression):
        def on_train_batch_end(self, outputs, batch, batch_idx):
            path = Path(self.trainer.logger.log_dir) / "metrics.csv"
            flushed.append(len(list(csv.DictReader(path.open()))) if path.exists() else 0)

    logger = CSVLogger(tmp_path, prefix="p", flush_logs_every_n_steps=2)
    fit_with(tmp_path, logger, module=Watch())
    rows = list(csv.DictReader((Path(logger.log_dir) / "metrics.csv").open()))
    assert "p-train_loss" in rows[0]
    # written every 2 steps (logged after the batch-end hooks, as Lightning), not only at the
    # epoch end
    assert flushed[:5] == [0, 0, 2, 2, 4]


def test_log_graph_adds_the_model_graph(tmp_path):
    class WithExample(Regression):
        def __init__(self):
            super().__init__()
            self.example_input_array = torch.randn(2, 4)

    tb = TensorBoardLogger(tmp_path, log_graph=True)
    fit_with(tmp_path, tb, module=WithExample())
    events = EventAccumulator(tb.log_dir)
    events.Reload()
    assert events.Graph() is not None


def test_log_graph_without_an_example_says_what_to_add(tmp_path):
    with pytest.raises(ValueError, match="example_input_array"):
        fit_with(tmp_path, TensorBoardLogger(tmp_path, log_graph=True))


def test_loggers_from_yaml_by_short_class_name(run_main, autoencoder_config, tmp_path):
    config = tmp_path / "loggers.yaml"
    config.write_text(
        "trainer:\n  logger:\n    - class_path: CSVLogger\n      init_args: {save_dir: csv, prefix: x}\n"
        "    - class_path: TensorBoardLogger\n      init_args: {save_dir: csv}\n"
    )
    result = run_main(
        "fit", "-c", autoencoder_config, "-c", str(config), "--trainer.max_epochs", "1",
        "--data.init_args.num_samples", "256",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    (metrics,) = (tmp_path / "csv").glob("trainkit_logs/version_0/metrics.csv")
    assert "x-val_loss" in metrics.read_text()
    assert list(metrics.parent.glob("events.out.tfevents.*"))
