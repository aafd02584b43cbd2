"""torchmetrics objects in ``self.log`` with Lightning's semantics: the step value is the
metric's forward for that batch, the epoch value its ``compute()`` over the epoch, then reset;
training and validation metrics keep separate state."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
import torch
import torchmetrics

from tests.helpers.metric_models import Blobs, MetricClassifier, blobs, full_dataset_scores
from trainkit import CSVLogger, TrainModule


def test_epoch_values_equal_the_metric_over_the_whole_validation_set(make_trainer):
    torch.manual_seed(0)
    module = MetricClassifier()
    data = Blobs(val_samples=203)  # a last batch of 11: a mean of batch means would differ
    trainer = make_trainer(max_epochs=2, limit_train_batches=5)
    trainer.fit(module, datamodule=data)
    reference = full_dataset_scores(module, blobs(203, 1))
    assert float(trainer.callback_metrics["val_acc"]) == pytest.approx(
        reference["val_acc"], abs=1e-6
    )
    assert float(trainer.callback_metrics["val_f1"]) == pytest.approx(reference["val_f1"], abs=1e-6)
    assert module.val_acc.update_count == 0 and module.train_acc.update_count == 0  # reset


def test_step_values_are_each_batch_and_the_epoch_value_covers_the_epoch(tmp_path, make_trainer):
    torch.manual_seed(0)
    module = MetricClassifier()
    trainer = make_trainer(
        max_epochs=1,
        limit_train_batches=6,
        logger=CSVLogger(),
        log_every_n_steps=1,
        limit_val_batches=0,
    )
    trainer.fit(module, datamodule=Blobs())
    rows = list(csv.DictReader((Path(trainer.log_dir) / "metrics.csv").open()))
    steps = [float(r["train_acc_step"]) for r in rows if r.get("train_acc_step")]
    assert steps == pytest.approx(module.step_accuracies, abs=1e-6)
    (epoch,) = [float(r["train_acc_epoch"]) for r in rows if r.get("train_acc_epoch")]
    assert epoch == pytest.approx(sum(module.step_accuracies) / 6, abs=1e-6)  # equal batches


def test_a_metric_updated_but_not_called_has_no_step_value(make_trainer):
    """As Lightning: no step value (said in one warning), the epoch value logged; the same
    program under both: tests/integration/compat/test_metric_update_only.py."""

    class UpdatesOnly(TrainModule):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(2, 3)
            self.acc = torchmetrics.Accuracy(task="multiclass", num_classes=3)

        def training_step(self, batch, batch_idx):
            x, y = batch
            logits = self.layer(x)
            self.acc.update(logits, y)
            self.log("acc", self.acc, on_step=True, on_epoch=True)
            return logits.sum()

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    trainer = make_trainer(max_epochs=1)
    with pytest.warns(UserWarning, match="only metric.update"):
        trainer.fit(UpdatesOnly(), datamodule=Blobs())
    assert sorted(trainer.callback_metrics) == ["acc", "acc_epoch"]


def test_an_epoch_end_hook_still_reads_the_logged_metric_before_it_is_reset(make_trainer):
    """lightning-hydra-template's ``val/acc_best``: ``on_validation_epoch_end`` calls
    ``self.val_acc.compute()`` on the metric it logged; Lightning resets it only afterwards."""

    class TracksBest(MetricClassifier):
        def __init__(self):
            super().__init__()
            self.best = torchmetrics.MaxMetric()
            self.seen: list[float] = []

        def on_validation_epoch_end(self):
            self.seen.append(float(self.val_acc.compute()))
            self.best(self.val_acc.compute())
            self.log("val_acc_best", self.best.compute())

    torch.manual_seed(0)
    module = TracksBest()
    trainer = make_trainer(max_epochs=2, limit_train_batches=5)
    trainer.fit(module, datamodule=Blobs())
    assert module.seen[-1] == pytest.approx(float(trainer.callback_metrics["val_acc"]), abs=1e-6)
    assert float(trainer.callback_metrics["val_acc_best"]) == pytest.approx(max(module.seen))
    assert module.val_acc.update_count == 0  # reset after the hook
