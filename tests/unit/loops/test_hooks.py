"""The optimised loop still does everything it skips work for: overridden hooks are called,
non-overridden ones are not bound at all, and logger values equal the plain computation."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from tests.helpers.models import Regression, regression_loader
from trainkit import Callback, CSVLogger, Trainer


class CountsBatches(Callback):
    def __init__(self):
        self.ends = 0

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        self.ends += 1


class EpochOnly(Callback):
    def on_train_epoch_end(self, trainer, module):
        pass


def test_only_overridden_hooks_are_bound_and_called(make_trainer):
    counting, epoch_only = CountsBatches(), EpochOnly()
    trainer = make_trainer(max_epochs=2, callbacks=[counting, epoch_only])
    trainer.fit(Regression(), regression_loader())
    assert counting.ends == 16
    hooks = trainer.run_state.hooks.bound("on_train_batch_end")
    assert [hook.func.__self__ for hook in hooks if hasattr(hook, "func")] == [counting]


def test_logger_rows_equal_the_values_the_module_computed(tmp_path):
    values = []

    class Recording(Regression):
        def training_step(self, batch, batch_idx):
            loss = super().training_step(batch, batch_idx)
            values.append(loss.item())
            return loss

    trainer = Trainer(
        accelerator="cpu",
        default_root_dir=str(tmp_path),
        max_epochs=1,
        log_every_n_steps=1,
        enable_progress_bar=False,
        enable_checkpointing=False,
        logger=CSVLogger(),
    )
    trainer.fit(Recording(), regression_loader())
    rows = list(csv.DictReader((Path(trainer.log_dir) / "metrics.csv").open()))
    logged = [float(r["train_loss"]) for r in rows if r.get("train_loss")]
    assert logged == pytest.approx(values, rel=1e-6)
    assert [int(r["step"]) for r in rows if r.get("train_loss")] == list(range(8))
