"""Manual optimization counts steps as Lightning does: every optimizer's ``step`` is one global
step (a GAN stepping two optimizers per batch is at step 6 after 3 batches), which names the
checkpoints and ends the fit at ``max_steps``; the loggers' step axis still counts batches."""

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


def run_two_optimizer_fit(pl: ModuleType, root: Path, **trainer_args: object) -> dict:
    """A two-optimizer manual fit over 4 batches of 4; what it counted, saved and logged."""

    class TwoOptimizers(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.automatic_optimization = False
            self.first, self.second = nn.Linear(2, 1), nn.Linear(2, 1)
            self.steps_seen: list[int] = []

        def training_step(self, batch, batch_idx):
            (x,) = batch
            for optimizer, layer in zip(self.optimizers(), (self.first, self.second)):
                optimizer.zero_grad()
                loss = layer(x).pow(2).mean()
                self.manual_backward(loss)
                optimizer.step()
                self.steps_seen.append(self.global_step)
            self.log("loss", loss, on_step=True, on_epoch=False)

        def configure_optimizers(self):
            return [
                torch.optim.SGD(self.first.parameters(), lr=0.1),
                torch.optim.SGD(self.second.parameters(), lr=0.1),
            ]

    torch.manual_seed(0)
    loader = DataLoader(TensorDataset(torch.randn(16, 2)), batch_size=4)
    model, logger = TwoOptimizers(), recorder(pl, root)
    checkpoint = pl.callbacks.ModelCheckpoint(dirpath=root / "checkpoints", save_last=False)
    trainer = pl.Trainer(
        default_root_dir=root,
        logger=logger,
        callbacks=[checkpoint],
        log_every_n_steps=1,
        enable_progress_bar=False,
        enable_model_summary=False,
        accelerator="cpu",
        devices=1,
        **trainer_args,
    )
    trainer.fit(model, loader)
    return {
        "global_step": trainer.global_step,
        "steps_seen": model.steps_seen,
        "checkpoints": sorted(path.name for path in (root / "checkpoints").iterdir()),
        "logged": [(step, names) for step, names in logged_names(logger) if "loss" in names],
    }


def test_each_optimizer_step_of_a_manual_module_is_one_global_step(tmp_path):
    run = run_two_optimizer_fit(trainkit, tmp_path, max_epochs=1)
    assert run["global_step"] == 8
    assert run["steps_seen"] == [1, 2, 3, 4, 5, 6, 7, 8]
    assert run["checkpoints"] == ["epoch=0-step=8.ckpt"]
    # the loggers count batches stepped before each (Lightning's axis)
    assert [step for step, _ in run["logged"]] == [0, 1, 2, 3]


def test_max_steps_counts_the_optimizer_steps_of_a_manual_module(tmp_path):
    run = run_two_optimizer_fit(trainkit, tmp_path, max_steps=5)
    assert run["global_step"] == 6  # three batches: the third reaches 5
    assert run["checkpoints"] == ["epoch=0-step=6.ckpt"]


@lightning_installed
@pytest.mark.lightning
@pytest.mark.parametrize("limit", [{"max_epochs": 1}, {"max_steps": 5}], ids=str)
def test_manual_steps_count_as_under_lightning(tmp_path, limit):
    lightning = importlib.import_module("lightning.pytorch")
    theirs = run_two_optimizer_fit(lightning, tmp_path / "lightning", **limit)
    ours = run_two_optimizer_fit(trainkit, tmp_path / "trainkit", **limit)
    assert ours == theirs  # the loggers' steps too
