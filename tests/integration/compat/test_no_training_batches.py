"""``limit_train_batches=0`` (or 0.0), as Lightning: the fit asks no training loader, runs no
training hook or step and no epoch, while the sanity check and the fit's own hooks still run."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from tests.helpers.models import RECORDED_HOOKS
from tests.integration.compat.frameworks import BOTH, framework, lightning_installed, quiet_trainer


def fit_without_training(pl_name: str, root: Path, limit: float) -> dict[str, object]:
    """Two epochs asked for, ``limit_train_batches=limit``: the hooks called (how many times
    each), the step and the epoch the Trainer ends at."""
    pl = framework(pl_name)
    calls: list[str] = []

    class Recorded(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(2, 1)

        def train_dataloader(self):
            calls.append("train_dataloader")
            return DataLoader(TensorDataset(torch.randn(8, 2)), batch_size=2)

        def val_dataloader(self):
            calls.append("val_dataloader")
            return DataLoader(TensorDataset(torch.randn(8, 2)), batch_size=2)

        def training_step(self, batch, batch_idx):
            calls.append("training_step")
            return self.layer(batch[0]).sum()

        def validation_step(self, batch, batch_idx):
            calls.append("validation_step")

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    for hook in RECORDED_HOOKS:
        if hook.startswith("on_") and "checkpoint" not in hook:
            setattr(Recorded, hook, lambda self, *_, hook=hook: calls.append(hook))
    trainer = quiet_trainer(
        pl, root, logger=False, max_epochs=2, limit_train_batches=limit, num_sanity_val_steps=2
    )
    trainer.fit(Recorded())
    return {"calls": Counter(calls), "step": trainer.global_step, "epoch": trainer.current_epoch}


@BOTH
@pytest.mark.parametrize("limit", [0, 0.0])
def test_a_limit_of_zero_trains_nothing_and_asks_no_training_loader(pl_name, tmp_path, limit):
    ran = fit_without_training(pl_name, tmp_path, limit)
    calls = ran["calls"]
    assert not [name for name in calls if "train" in name or "backward" in name], calls
    assert calls["on_fit_start"] == calls["on_fit_end"] == calls["val_dataloader"] == 1
    assert calls["validation_step"] == 2  # the sanity check's
    assert (ran["step"], ran["epoch"]) == (0, 0)


@lightning_installed
def test_trainkit_and_lightning_agree(tmp_path):
    assert fit_without_training("trainkit", tmp_path / "trainkit", 0) == fit_without_training(
        "lightning.pytorch", tmp_path / "lightning", 0
    )
