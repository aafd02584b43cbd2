"""Loggers (TensorBoard, CSV, hparams.yaml) and callbacks (checkpoint, early stopping, LR, progress)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
import torch
import yaml

from tests.helpers.models import Regression, regression_loader
from trainkit import (
    CSVLogger,
    EarlyStopping,
    LearningRateMonitor,
    ModelCheckpoint,
    TensorBoardLogger,
    Trainer,
)


def logged_trainer(tmp_path, **kwargs):
    options = dict(
        accelerator="cpu",
        default_root_dir=str(tmp_path),
        enable_progress_bar=False,
        log_every_n_steps=2,
        num_sanity_val_steps=0,
    )
    options.update(kwargs)
    return Trainer(**options)


def test_tensorboard_and_csv_logs_share_one_version_folder(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    trainer = logged_trainer(tmp_path, max_epochs=2, logger=[TensorBoardLogger(), CSVLogger()])
    trainer.fit(Regression(lr=0.07), regression_loader(), regression_loader())
    log_dir = Path(trainer.log_dir)
    assert log_dir == tmp_path / "trainkit_logs" / "version_0"
    events = EventAccumulator(str(log_dir))
    events.Reload()
    assert {"train_loss", "val_loss", "epoch"} <= set(events.Tags()["scalars"])
    # every 2nd batch, at the batches stepped before it (Lightning's axis)
    assert [e.step for e in events.Scalars("train_loss")] == [1, 3, 5, 7, 9, 11, 13, 15]
    rows = list(csv.DictReader((log_dir / "metrics.csv").open()))
    assert {"step", "train_loss", "val_loss", "epoch"} <= set(rows[0])
    assert yaml.safe_load((log_dir / "hparams.yaml").read_text()) == {"lr": 0.07, "features": 4}
    second = logged_trainer(tmp_path, max_epochs=1, logger=[TensorBoardLogger(), CSVLogger()])
    second.fit(Regression(), regression_loader())
    assert Path(second.log_dir).name == "version_1"


def test_the_default_logger_is_tensorboard_alone_as_in_lightning(tmp_path):
    trainer = logged_trainer(tmp_path, max_epochs=1)
    trainer.fit(Regression(), regression_loader())
    assert [type(logger).__name__ for logger in trainer.loggers] == ["TensorBoardLogger"]
    assert trainer.log_dir == str(tmp_path / "trainkit_logs" / "version_0")
    assert list(Path(trainer.log_dir).glob("events.out.tfevents.*"))
    assert not list(tmp_path.rglob("metrics.csv"))


def test_a_folder_logger_without_save_dir_logs_under_default_root_dir(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    given = CSVLogger(tmp_path / "elsewhere")
    trainer = logged_trainer(tmp_path / "root", max_epochs=1, logger=[CSVLogger(), given])
    trainer.fit(Regression(), regression_loader())
    assert trainer.loggers[0].save_dir == str(tmp_path / "root")
    assert given.save_dir == str(tmp_path / "elsewhere")
    assert (tmp_path / "root" / "trainkit_logs" / "version_0" / "metrics.csv").is_file()
    assert (tmp_path / "elsewhere" / "trainkit_logs" / "version_0" / "metrics.csv").is_file()


def test_model_checkpoint_keeps_top_k_by_monitor_and_last(tmp_path):
    callback = ModelCheckpoint(monitor="val_loss", save_top_k=2, filename="{epoch}-{val_loss:.4f}")
    trainer = logged_trainer(tmp_path, max_epochs=5, callbacks=[callback], logger=False)
    trainer.fit(Regression(lr=0.02), regression_loader(), regression_loader(seed=1))
    files = sorted(p.name for p in Path(callback.dirpath).iterdir())
    assert len(files) == 3 and "last.ckpt" in files
    assert all(
        name.startswith("epoch=") and "-val_loss=" in name for name in files if name != "last.ckpt"
    )
    assert callback.best_model_score == min(callback.best_k_models.values())
    assert Path(callback.best_model_path).name.startswith("epoch=4")


def test_model_checkpoint_every_n_epochs(tmp_path):
    callback = ModelCheckpoint(save_top_k=-1, every_n_epochs=2, save_last=False)
    logged_trainer(tmp_path, max_epochs=5, callbacks=[callback], logger=False).fit(
        Regression(), regression_loader()
    )
    assert sorted(p.name for p in Path(callback.dirpath).iterdir()) == [
        "epoch=1-step=16.ckpt",
        "epoch=3-step=32.ckpt",
        "epoch=4-step=40.ckpt",
    ]


class Plateau(Regression):
    def validation_step(self, batch, batch_idx):
        self.log("val_loss", torch.tensor(1.0))


def test_early_stopping_stops_after_patience(tmp_path):
    stopper = EarlyStopping(monitor="val_loss", patience=2)
    trainer = logged_trainer(tmp_path, max_epochs=20, callbacks=[stopper], logger=False)
    trainer.fit(Plateau(), regression_loader(), regression_loader())
    assert trainer.current_epoch == 3 and stopper.stopped_epoch == 2


def test_early_stopping_threshold_and_min_epochs(tmp_path):
    stopper = EarlyStopping(monitor="val_loss", stopping_threshold=10.0)
    trainer = logged_trainer(
        tmp_path, max_epochs=20, min_epochs=4, callbacks=[stopper], logger=False
    )
    trainer.fit(Plateau(), regression_loader(), regression_loader())
    assert trainer.current_epoch == 4 and "stopping_threshold" in stopper.stop_reason


def test_monitoring_an_unlogged_metric_names_what_was_logged(tmp_path):
    trainer = logged_trainer(
        tmp_path, max_epochs=2, callbacks=[EarlyStopping(monitor="val_acc")], logger=False
    )
    with pytest.raises(KeyError, match=r"val_acc.*train_loss"):
        trainer.fit(Regression(), regression_loader())


def test_learning_rate_monitor_logs_each_epoch(tmp_path):
    class Scheduled(Regression):
        def configure_optimizers(self):
            opt = torch.optim.SGD(self.parameters(), lr=0.1)
            return {"optimizer": opt, "lr_scheduler": torch.optim.lr_scheduler.StepLR(opt, 1, 0.5)}

    trainer = logged_trainer(
        tmp_path, max_epochs=3, callbacks=[LearningRateMonitor()], logger=CSVLogger()
    )
    trainer.fit(Scheduled(), regression_loader())
    rows = list(csv.DictReader((Path(trainer.log_dir) / "metrics.csv").open()))
    assert [float(r["lr-SGD"]) for r in rows if r.get("lr-SGD")] == [0.1, 0.05, 0.025]


def test_progress_without_a_terminal_prints_one_line_per_epoch(tmp_path, capsys):
    trainer = logged_trainer(tmp_path, max_epochs=3, enable_progress_bar=True, logger=False)
    trainer.fit(Regression(), regression_loader())
    lines = [line for line in capsys.readouterr().out.splitlines() if line.startswith("epoch")]
    assert len(lines) == 3 and "train_loss=" in lines[0] and "\x1b[" not in lines[0]


def test_rich_progress_bar_renders_when_forced(tmp_path, capsys):
    from trainkit import ProgressBar

    trainer = logged_trainer(
        tmp_path, max_epochs=1, callbacks=[ProgressBar(force_rich=True)], logger=False
    )
    trainer.fit(Regression(), regression_loader(), regression_loader())
    assert "epoch 0" in capsys.readouterr().out
