"""``ModelCheckpoint(monitor="val_loss")`` in a module that never logs it, as Lightning: before
any validation ran it warns once and trains on, saving no top-k checkpoint (``last.ckpt`` where
``save_last`` asks for it); once a validation ran without the key it is an error (issue #47)."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from tests.integration.compat.frameworks import framework, lightning_installed, quiet_trainer

SETTINGS = {
    "top1": {"save_last": False},
    "last": {"save_last": True},
    "all_and_last": {"save_last": True, "save_top_k": -1},
    "every_step": {"save_last": True, "every_n_train_steps": 1},
}


def fit_monitoring(pl_name: str, root: Path, validates: bool, **checkpoint: object) -> dict:
    """Three epochs of two batches, checkpointing on 'val_loss', which nothing logs (the
    module has a validation_step logging 'val_other' when ``validates``)."""
    pl = framework(pl_name)

    class NoValLoss(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.layer = nn.Linear(2, 1)

        def training_step(self, batch, batch_idx):
            (x,) = batch
            loss = self.layer(x).pow(2).mean()
            self.log("train_loss", loss)
            return loss

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    class Validates(NoValLoss):
        def validation_step(self, batch, batch_idx):
            self.log("val_other", self.layer(batch[0]).mean())

    if pl_name != "trainkit":  # Lightning warns once per process: once per run here
        from lightning.pytorch.callbacks import model_checkpoint

        model_checkpoint.warning_cache.clear()
    torch.manual_seed(0)
    loader = DataLoader(TensorDataset(torch.randn(8, 2)), batch_size=4)
    callback = pl.callbacks.ModelCheckpoint(monitor="val_loss", **checkpoint)
    trainer = quiet_trainer(
        pl, root, logger=False, callbacks=[callback], max_epochs=3, enable_checkpointing=True
    )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            if validates:
                trainer.fit(Validates(), loader, loader)
            else:
                trainer.fit(NoValLoss(), loader)
            error = None
        except Exception as raised:  # both frameworks: a MisconfigurationException/Error
            text, _, keys = str(raised).split("HINT")[0].partition("metrics: ")
            error = (text, sorted(keys.strip(" .[]").replace("'", "").split(", ")))
    folder = root / "checkpoints"
    return {
        "error": error,
        "epochs": trainer.current_epoch,
        "steps": trainer.global_step,
        "files": sorted(p.name for p in folder.iterdir()) if folder.is_dir() else [],
        "best": Path(callback.best_model_path).name,
        "last": Path(callback.last_model_path).name,
        "best_k": sorted(Path(p).name for p in callback.best_k_models),
        "warnings": sum("could not find the monitored key" in str(w.message) for w in caught),
    }


def test_without_validation_it_warns_once_and_trains_on(tmp_path):
    run = fit_monitoring("trainkit", tmp_path, validates=False, save_last=True)
    assert run["error"] is None and (run["epochs"], run["steps"]) == (3, 6)
    assert run["files"] == ["last.ckpt"] and run["best"] == "" and run["best_k"] == []
    assert run["warnings"] == 1


def test_after_a_validation_without_the_key_it_is_an_error(tmp_path):
    run = fit_monitoring("trainkit", tmp_path, validates=True, save_last=True)
    assert "could not find the monitored key" in run["error"][0] and run["epochs"] == 0
    assert run["error"][1] == ["epoch", "step", "train_loss", "val_other"]


@lightning_installed
@pytest.mark.lightning
@pytest.mark.parametrize("validates", [False, True], ids=["no_validation", "validation"])
@pytest.mark.parametrize("setting", list(SETTINGS))
def test_the_same_as_lightning(tmp_path, setting, validates):
    theirs = fit_monitoring("lightning.pytorch", tmp_path / "l", validates, **SETTINGS[setting])
    ours = fit_monitoring("trainkit", tmp_path / "t", validates, **SETTINGS[setting])
    assert ours.pop("warnings") == theirs.pop("warnings")  # once (Lightning's cache), or never
    assert ours == theirs  # the error's text and the keys it names too
