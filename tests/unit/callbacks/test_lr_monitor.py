"""LearningRateMonitor with Lightning's arguments and names, in real fits with a CSV logger."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
import torch

from tests.helpers.models import Regression, regression_loader
from trainkit import CSVLogger, Trainer
from trainkit.callbacks import LearningRateMonitor
from trainkit.errors import MisconfigurationError


class TwoGroups(Regression):
    """Adam on the weight and (named) the bias, with a per-step scheduler."""

    def configure_optimizers(self):
        optimizer = torch.optim.Adam(
            [
                {"params": [self.layer.weight]},
                {"params": [self.layer.bias], "name": "bias", "weight_decay": 0.01},
            ],
            lr=0.1,
            betas=(0.8, 0.99),
        )
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, 4, 0.5)
        return {
            "optimizer": optimizer,
            "lr_scheduler": {"scheduler": scheduler, "interval": "step"},
        }


def logged(tmp_path, monitor, model, logger=True):
    trainer = Trainer(
        accelerator="cpu",
        max_epochs=1,
        log_every_n_steps=2,
        enable_progress_bar=False,
        enable_model_summary=False,
        enable_checkpointing=False,
        num_sanity_val_steps=0,
        logger=CSVLogger(tmp_path) if logger else False,
        callbacks=[monitor],
    )
    trainer.fit(model, regression_loader())
    if not logger:
        return trainer, []
    rows = list(csv.DictReader((Path(trainer.log_dir) / "metrics.csv").open()))
    return trainer, rows


def test_param_groups_named_and_logged_at_the_schedulers_interval(tmp_path):
    monitor = LearningRateMonitor(log_momentum=True, log_weight_decay=True)
    trainer, rows = logged(tmp_path, monitor, TwoGroups())
    steps = [int(r["step"]) for r in rows if r.get("lr-Adam/pg1")]
    # a step scheduler: before every log_every_n_steps-th step, as Lightning (1, 3, 5, 7)
    assert steps == [1, 3, 5, 7]
    assert monitor.lrs == {
        "lr-Adam/pg1": [0.1, 0.1, 0.05, 0.05],
        "lr-Adam/bias": [0.1, 0.1, 0.05, 0.05],
    }
    first = next(r for r in rows if r.get("lr-Adam/pg1"))
    assert float(first["lr-Adam/pg1-momentum"]) == 0.8  # Adam's first beta
    assert float(first["lr-Adam/bias-weight_decay"]) == 0.01
    assert trainer.callback_metrics["lr-Adam/bias"] == pytest.approx(0.05)  # monitorable


def test_without_a_scheduler_a_fixed_interval(tmp_path):
    monitor = LearningRateMonitor(logging_interval="epoch")
    _, rows = logged(tmp_path, monitor, Regression(lr=0.05))
    assert [(r["step"], r["lr-SGD"]) for r in rows if r.get("lr-SGD")] == [("0", "0.05")]


def test_needs_a_logger(tmp_path):
    with pytest.raises(MisconfigurationError, match="with `Trainer` that has no logger"):
        logged(tmp_path, LearningRateMonitor(), Regression(), logger=False)
