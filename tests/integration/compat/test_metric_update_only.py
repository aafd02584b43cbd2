"""``self.log(name, metric)`` of a torchmetrics Metric that the step only ``update``s: as under
Lightning there is no step value (left out of the step's log, the progress bar and the callback
metrics), the epoch value is the metric's ``compute()``; trainkit says so in one warning
(issue #47)."""

from __future__ import annotations

import warnings

import pytest
import torch
import torchmetrics
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from tests.integration.compat.frameworks import (
    LIGHTNING,
    framework,
    lightning_installed,
    quiet_trainer,
    recorder,
)

# self.log options: Lightning's training defaults (on_step only), both, epoch only
OPTIONS = {
    "default": {},
    "both": {"on_step": True, "on_epoch": True},
    "epoch": {"on_step": False, "on_epoch": True},
}


def fit_updating_only(pl_name: str, root, options: dict) -> dict:
    """Two epochs of four batches; training and validation steps update an accuracy and log
    it with ``options``."""
    pl = framework(pl_name)

    class UpdatesOnly(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.layer = nn.Linear(2, 2)
            self.train_acc = torchmetrics.Accuracy("multiclass", num_classes=2)
            self.val_acc = torchmetrics.Accuracy("multiclass", num_classes=2)

        def training_step(self, batch, batch_idx):
            x, y = batch
            logits = self.layer(x)
            self.train_acc.update(logits.argmax(1), y)
            self.log("train_acc", self.train_acc, prog_bar=True, **options)
            return nn.functional.cross_entropy(logits, y)

        def validation_step(self, batch, batch_idx):
            x, y = batch
            self.val_acc.update(self.layer(x).argmax(1), y)
            self.log("val_acc", self.val_acc, prog_bar=True, **options)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    torch.manual_seed(0)
    data = TensorDataset(torch.randn(16, 2), torch.randint(0, 2, (16,)))
    logger = recorder(pl, root)
    trainer = quiet_trainer(pl, root, logger=logger, max_epochs=2, log_every_n_steps=1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer.fit(UpdatesOnly(), DataLoader(data, batch_size=4), DataLoader(data, batch_size=8))
    said = [str(w.message) for w in caught if "only metric.update" in str(w.message)]
    return {
        "records": logger.records,
        "callback_metrics": {k: round(float(v), 6) for k, v in trainer.callback_metrics.items()},
        "logged_metrics": {k: round(float(v), 6) for k, v in trainer.logged_metrics.items()},
        "progress_bar_metrics": sorted(trainer.progress_bar_metrics),
        "warned": sorted(set(said)),
    }


def test_no_step_value_the_epoch_value_and_one_warning_per_name(tmp_path):
    run = fit_updating_only("trainkit", tmp_path, OPTIONS["both"])
    assert sorted(run["callback_metrics"]) == [
        "train_acc",
        "train_acc_epoch",
        "val_acc",
        "val_acc_epoch",
    ]
    assert all(not name.endswith("_step") for _, record in run["records"] for name in record)
    assert len(run["warned"]) == 2  # train_acc and val_acc, each once
    assert all("\n" not in message for message in run["warned"])


@pytest.mark.parametrize("options", list(OPTIONS), ids=list(OPTIONS))
@lightning_installed
@pytest.mark.lightning
def test_the_same_as_lightning(tmp_path, options):
    assert LIGHTNING
    theirs = fit_updating_only("lightning.pytorch", tmp_path / "l", OPTIONS[options])
    ours = fit_updating_only("trainkit", tmp_path / "t", OPTIONS[options])
    assert theirs.pop("warned") == []
    warned = ours.pop("warned")
    assert bool(warned) == (options != "epoch")  # said when a step value was asked for
    assert ours == theirs
