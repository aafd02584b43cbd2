"""``self.log(name, on_step=..., on_epoch=...)`` in each step method names its metrics as
Lightning does: what the loggers receive (and at which steps), ``callback_metrics``,
``logged_metrics`` and ``progress_bar_metrics``."""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import trainkit
from tests.integration.compat.frameworks import logged_names, recorder

lightning_installed = pytest.mark.skipif(
    importlib.util.find_spec("lightning") is None,
    reason="Lightning is not installed (pip install 'lightning==2.6.*' to compare with it)",
)
STAGES = ("training", "validation", "test")
COMBINATIONS = ((True, False), (False, True), (True, True))


def names_after_fit_and_test(
    pl: ModuleType, root: Path, stage: str, on_step: bool, on_epoch: bool
) -> dict[str, object]:
    """Fit 2 epochs of 2 batches (validating each) then test, logging ``m`` in ``stage``'s
    step; the names each place holds after the fit and after the test."""

    class Logs(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.layer = nn.Linear(2, 1)

        def step(self, batch, logged: str):
            (x,) = batch
            loss = self.layer(x).pow(2).mean()
            if logged == stage:
                self.log("m", loss, on_step=on_step, on_epoch=on_epoch, prog_bar=True)
            return loss

        def training_step(self, batch, batch_idx):
            return self.step(batch, "training")

        def validation_step(self, batch, batch_idx):
            self.step(batch, "validation")

        def test_step(self, batch, batch_idx):
            self.step(batch, "test")

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    torch.manual_seed(0)
    loader = DataLoader(TensorDataset(torch.randn(8, 2)), batch_size=4)
    logger = recorder(pl, root)
    trainer = pl.Trainer(
        default_root_dir=root,
        logger=logger,
        max_epochs=2,
        log_every_n_steps=1,
        num_sanity_val_steps=0,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        accelerator="cpu",
        devices=1,
    )
    model = Logs()
    trainer.fit(model, loader, loader)

    def seen() -> dict[str, object]:
        return {
            "callback_metrics": sorted(trainer.callback_metrics),
            "logged_metrics": sorted(trainer.logged_metrics),
            "progress_bar_metrics": sorted(trainer.progress_bar_metrics),
        }

    after_fit = seen()
    trainer.test(model, loader)
    return {
        "fit": after_fit,
        "test": seen(),
        "logger": [
            (step, names)
            for step, names in logged_names(logger)
            if any(n.split("_")[0] == "m" for n in names)
        ],
    }


def test_a_validation_metric_logged_on_step_and_on_epoch_splits_its_name(tmp_path):
    run = names_after_fit_and_test(trainkit, tmp_path, "validation", True, True)
    assert run["fit"] == {
        "callback_metrics": ["m", "m_epoch"],  # monitors read epoch values only
        "logged_metrics": ["m_epoch", "m_step"],
        "progress_bar_metrics": ["m_epoch", "m_step"],
    }
    # each validation batch at its count over the fit's validation runs; the epoch value at
    # the training batches stepped before the epoch's last (Lightning's axis)
    assert run["logger"] == [
        (0, ("m_step",)),
        (1, ("m_step",)),
        (1, ("epoch", "m_epoch")),
        (2, ("m_step",)),
        (3, ("m_step",)),
        (3, ("epoch", "m_epoch")),
    ]


@lightning_installed
@pytest.mark.lightning
@pytest.mark.parametrize("stage", STAGES)
@pytest.mark.parametrize(("on_step", "on_epoch"), COMBINATIONS, ids=["step", "epoch", "both"])
def test_metric_names_are_lightnings(tmp_path, stage, on_step, on_epoch):
    lightning = importlib.import_module("lightning.pytorch")
    theirs = names_after_fit_and_test(lightning, tmp_path / "l", stage, on_step, on_epoch)
    ours = names_after_fit_and_test(trainkit, tmp_path / "t", stage, on_step, on_epoch)
    assert ours == theirs  # the loggers' steps too
