"""EarlyStopping with Lightning's arguments, reasons and messages, in real fits."""

from __future__ import annotations

import math

import pytest
import torch

from tests.helpers.models import Regression, regression_loader
from trainkit import Trainer
from trainkit.callbacks import EarlyStopping, EarlyStoppingReason


class Scripted(Regression):
    """Logs the next value of ``val_losses`` as val_loss at each validation."""

    def __init__(self, val_losses: list[float]) -> None:
        super().__init__()
        self.val_losses = list(val_losses)
        self.validations = 0

    def validation_step(self, batch, batch_idx):
        value = self.val_losses[min(self.validations, len(self.val_losses) - 1)]
        self.log("val_loss", torch.tensor(value))

    def on_validation_epoch_end(self):
        self.validations += 1


def fit(stopper, losses, max_epochs=10, **options):
    trainer = Trainer(
        accelerator="cpu",
        max_epochs=max_epochs,
        enable_progress_bar=False,
        enable_checkpointing=False,
        enable_model_summary=False,
        logger=False,
        num_sanity_val_steps=0,
        callbacks=[stopper],
        **options,
    )
    model = Scripted(losses)
    trainer.fit(model, regression_loader(), regression_loader(seed=1))
    return trainer, model


def test_divergence_threshold_stops_with_lightnings_reason(capsys):
    stopper = EarlyStopping("val_loss", divergence_threshold=5.0, verbose=True)
    trainer, _ = fit(stopper, [3.0, 4.0, 6.0, 1.0])
    # Lightning writes the sign of the mode ("<" for min) in a divergence message too
    assert trainer.current_epoch == 3 and stopper.stopped_epoch == 2
    assert stopper.stopping_reason is EarlyStoppingReason.DIVERGENCE_THRESHOLD
    message = "Divergence threshold reached: val_loss = 6.0 < 5.0. Signaling Trainer to stop."
    assert stopper.stopping_reason_message == message and message in capsys.readouterr().out


def test_a_non_finite_metric_stops_at_once():
    stopper = EarlyStopping("val_loss", patience=100)
    fit(stopper, [3.0, 2.0, math.nan, 1.0])
    assert stopper.stopped_epoch == 2
    assert stopper.stopping_reason is EarlyStoppingReason.NON_FINITE_METRIC
    assert stopper.stopping_reason_message == (
        "Monitored metric val_loss = nan is not finite. Previous best value was 2.000. "
        "Signaling Trainer to stop."
    )
    unchecked = EarlyStopping("val_loss", patience=100, check_finite=False)
    trainer, _ = fit(unchecked, [3.0, 2.0, math.nan, 1.0], max_epochs=5)
    assert (
        trainer.current_epoch == 5 and unchecked.stopping_reason is EarlyStoppingReason.NOT_STOPPED
    )


def test_patience_and_min_delta_with_lightnings_message():
    stopper = EarlyStopping("val_loss", patience=2, min_delta=0.5, mode="min")
    fit(stopper, [3.0, 2.8, 2.6, 1.0, 0.9, 0.8])  # 2.8 and 2.6 improve by less than 0.5
    assert stopper.stopped_epoch == 2 and stopper.best_score == 3.0
    assert stopper.stopping_reason is EarlyStoppingReason.PATIENCE_EXHAUSTED
    assert stopper.stopping_reason_message == (
        "Monitored metric val_loss did not improve in the last 2 records. Best score: 3.000. "
        "Signaling Trainer to stop."
    )


def test_stopping_threshold_in_max_mode():
    stopper = EarlyStopping("val_loss", mode="max", stopping_threshold=0.75)
    fit(stopper, [0.5, 0.75, 0.875, 0.99])  # 0.75 is not beyond the threshold, 0.875 is
    assert stopper.stopped_epoch == 2
    assert stopper.stopping_reason_message == (
        "Stopping threshold reached: val_loss = 0.875 > 0.75. Signaling Trainer to stop."
    )


def test_strict_raises_lightnings_error_and_non_strict_trains_on():
    with pytest.raises(RuntimeError) as raised:
        fit(EarlyStopping("val_acc"), [1.0])
    assert str(raised.value) == (
        "Early stopping conditioned on metric `val_acc` which is not available. Pass in or modify "
        "your `EarlyStopping` callback to use any of the following: `val_loss`, `train_loss`"
    )
    lenient = EarlyStopping("val_acc", strict=False)
    trainer, _ = fit(lenient, [1.0], max_epochs=3)
    assert trainer.current_epoch == 3 and lenient.wait_count == 0


def test_checking_after_each_validation_counts_validations_not_epochs():
    """Validation twice an epoch: by default the check follows each validation (patience 2 is
    spent within one epoch); check_on_train_epoch_end=True checks once an epoch."""
    per_validation = EarlyStopping("val_loss", patience=2)
    trainer, model = fit(per_validation, [1.0], val_check_interval=0.5)
    assert model.validations == 3 and trainer.current_epoch == 2  # stopped mid-epoch 1
    per_epoch = EarlyStopping("val_loss", patience=2, check_on_train_epoch_end=True)
    trainer, model = fit(per_epoch, [1.0], val_check_interval=0.5)
    assert model.validations == 6 and trainer.current_epoch == 3


def test_log_rank_zero_only_prints_on_one_rank(capsys):
    stopper = EarlyStopping("val_loss", verbose=True, log_rank_zero_only=True)
    fit(stopper, [3.0, 2.0], max_epochs=2)
    out = capsys.readouterr().out
    assert "Metric val_loss improved. New best score: 3.000" in out
    assert "Metric val_loss improved by 1.000 >= min_delta = 0.0. New best score: 2.000" in out
