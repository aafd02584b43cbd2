"""An epoch that ``max_steps`` ends early: counted as Lightning counts it (``current_epoch``, a
checkpoint's ``epoch``, the loggers' ``epoch``), while a fit resumed from a checkpoint written
after it finishes that epoch and equals the uninterrupted fit."""

from __future__ import annotations

import warnings
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from tests.integration.compat.frameworks import BOTH, framework, quiet_trainer, recorder, seeded
from trainkit.utilities.exceptions import MisconfigurationException

BATCHES = 5  # per epoch; max_steps=3 ends the first epoch after its third batch


def module_class(pl: ModuleType) -> type:
    class Model(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.layer = nn.Linear(2, 1)
            self.seen: list[tuple[Any, ...]] = []  # (epoch, batch_idx) of each step, hooks

        def training_step(self, batch, batch_idx):
            self.seen.append((self.current_epoch, batch_idx))
            loss = self.layer(batch[0]).pow(2).mean()
            self.log("loss", loss, on_epoch=True)
            return loss

        def on_train_epoch_end(self) -> None:
            self.seen.append(("epoch end", self.current_epoch))

        def on_train_end(self) -> None:
            self.seen.append(("train end", self.current_epoch))

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    return Model


def loader() -> DataLoader:
    data = torch.randn(2 * BATCHES, 2, generator=torch.Generator().manual_seed(1))
    return DataLoader(TensorDataset(data), batch_size=2)


def fit(pl: ModuleType, root: Path, max_steps: int, ckpt_path: str | None = None) -> Any:
    seeded()
    trainer = quiet_trainer(pl, root, max_epochs=3, max_steps=max_steps, logger=recorder(pl, root))
    model = module_class(pl)()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Lightning's "resuming mid-epoch" note
        trainer.fit(model, loader(), ckpt_path=ckpt_path)
    return trainer, model


@BOTH
def test_an_epoch_cut_by_max_steps_counts_once_its_end_hooks_ran(tmp_path, pl_name):
    trainer, model = fit(framework(pl_name), tmp_path, max_steps=3)
    assert model.seen == [(0, 0), (0, 1), (0, 2), ("epoch end", 0), ("train end", 1)]
    assert (trainer.current_epoch, trainer.global_step) == (1, 3)
    epochs = [values["epoch"] for _, values in trainer.logger.records if "loss_epoch" in values]
    assert epochs == [0]
    path = tmp_path / "after.ckpt"
    trainer.save_checkpoint(path)
    assert torch.load(path, weights_only=False)["epoch"] == 1


def test_a_fit_resumed_after_an_epoch_cut_short_finishes_it_as_the_uninterrupted_fit(tmp_path):
    """Lightning resumes such a checkpoint at the next epoch's cut batch index with the loader
    started over (docs/compat.md, "Different, on purpose"); trainkit finishes the cut epoch."""
    pl = framework("trainkit")
    whole, whole_model = fit(pl, tmp_path / "whole", max_steps=8)
    first, _ = fit(pl, tmp_path / "first", max_steps=3)
    path = tmp_path / "after.ckpt"
    first.save_checkpoint(path)
    resumed, resumed_model = fit(pl, tmp_path / "resumed", max_steps=8, ckpt_path=str(path))
    assert resumed_model.seen == [
        (0, 3),
        (0, 4),
        ("epoch end", 0),
        (1, 0),
        (1, 1),
        (1, 2),
        ("epoch end", 1),
        ("train end", 2),
    ]
    assert whole_model.seen[-len(resumed_model.seen) :] == resumed_model.seen
    assert (resumed.current_epoch, resumed.global_step) == (whole.current_epoch, 8) == (2, 8)
    for mine, theirs in zip(resumed_model.parameters(), whole_model.parameters(), strict=True):
        assert torch.equal(mine, theirs)


@pytest.mark.parametrize("interval", ["step", "epoch"])
def test_plateau_scheduler_reads_its_metric_after_the_validation(tmp_path, interval):
    """A ReduceLROnPlateau of either interval steps with the monitored value (Lightning's
    order: after the batch's validation, or after the epoch-end hooks); not logged: Lightning's
    MisconfigurationError, raised after the monitoring callbacks ran."""
    pl = framework("trainkit")

    class Plateau(module_class(pl)):
        def configure_optimizers(self):
            optimizer = torch.optim.SGD(self.parameters(), lr=0.1)
            scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, patience=0)
            config = {"scheduler": scheduler, "interval": interval, "monitor": self.monitor}
            return {"optimizer": optimizer, "lr_scheduler": config}

    seeded()
    model = Plateau()
    model.monitor = "loss"  # logged on_step and on_epoch: 'loss' is in callback_metrics
    trainer = quiet_trainer(pl, tmp_path, max_epochs=2, logger=False)
    trainer.fit(model, loader())
    assert trainer.lr_scheduler_configs[0].scheduler.last_epoch == (10 if interval == "step" else 2)
    model = Plateau()
    model.monitor = "never_logged"
    checkpoint = pl.callbacks.ModelCheckpoint(dirpath=str(tmp_path / "ckpt"), save_last=False)
    trainer = quiet_trainer(
        pl, tmp_path, max_epochs=2, logger=False, enable_checkpointing=True, callbacks=[checkpoint]
    )
    with pytest.raises(MisconfigurationException, match="never_logged"):
        trainer.fit(model, loader())
    saved = sorted(path.name for path in (tmp_path / "ckpt").glob("*.ckpt"))
    assert saved == ([] if interval == "step" else ["epoch=0-step=5.ckpt"])


def test_manual_optimization_warns_of_the_scheduler_keys_it_ignores(tmp_path):
    """Lightning's RuntimeWarning: under manual optimization the module steps its schedulers,
    so 'monitor' and 'strict' do nothing (a ReduceLROnPlateau needs no monitor there)."""
    pl = framework("trainkit")

    class Manual(module_class(pl)):
        def __init__(self) -> None:
            super().__init__()
            self.automatic_optimization = False

        def training_step(self, batch, batch_idx):
            loss = super().training_step(batch, batch_idx)
            optimizer = self.optimizers()
            optimizer.zero_grad()
            self.manual_backward(loss)
            optimizer.step()

        def configure_optimizers(self):
            optimizer = torch.optim.SGD(self.parameters(), lr=0.1)
            scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer)
            config = {"scheduler": scheduler, "monitor": "loss", "strict": False}
            return {"optimizer": optimizer, "lr_scheduler": config}

    trainer = quiet_trainer(pl, tmp_path, max_epochs=1, logger=False)
    with pytest.warns(RuntimeWarning, match=r"\['monitor', 'strict'\].*manual optimization"):
        trainer.fit(Manual(), loader())
    assert [config.monitor for config in trainer.lr_scheduler_configs] == [None]
    assert trainer.lr_scheduler_configs[0].scheduler.last_epoch == 0  # the module did not step it
