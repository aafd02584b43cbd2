"""``Trainer(logger=True)`` (the default) gives what Lightning gives: one TensorBoard logger, its
``log_dir`` and checkpoint folder, and an ``experiment`` that takes images in every logger (the
loop over ``self.loggers`` of Lightning's GAN example)."""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from types import ModuleType

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import trainkit

lightning_installed = pytest.mark.skipif(
    importlib.util.find_spec("lightning") is None,
    reason="Lightning is not installed (pip install 'lightning==2.6.*' to compare with it)",
)


def fit_with_the_default_logger(pl: ModuleType, root: Path) -> dict[str, object]:
    """One epoch of 4 batches with ``logger=True``; what the run's loggers and folders are."""

    class Images(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.layer = nn.Linear(2, 1)

        def training_step(self, batch, batch_idx):
            loss = self.layer(batch[0]).pow(2).mean()
            self.log("loss", loss)
            return loss

        def on_train_epoch_end(self) -> None:
            for logger in self.loggers:  # Lightning's GAN example logs its samples this way
                logger.experiment.add_image("samples", torch.rand(3, 4, 4), self.current_epoch)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    trainer = pl.Trainer(
        accelerator="cpu",
        devices=1,
        max_epochs=1,
        log_every_n_steps=1,
        enable_progress_bar=False,
        enable_model_summary=False,
        default_root_dir=str(root),
    )
    trainer.fit(Images(), DataLoader(TensorDataset(torch.randn(8, 2)), batch_size=2))
    log_dir = Path(trainer.log_dir)
    return {
        "loggers": [type(logger).__name__ for logger in trainer.loggers],
        "logger is the first": trainer.logger is trainer.loggers[0],
        "log_dir": log_dir.relative_to(root).parts[1:],  # lightning_logs / trainkit_logs apart
        "files": sorted(p.name.split(".")[0] for p in log_dir.iterdir()),
        "checkpoints": sorted(p.name for p in (log_dir / "checkpoints").iterdir()),
    }


@lightning_installed
def test_the_default_logger_is_lightnings(tmp_path, monkeypatch):
    for name in [key for key in os.environ if key.startswith("SLURM_")]:
        monkeypatch.delenv(name)  # Lightning names the version after a SLURM job
    import lightning.pytorch as pl

    ours = fit_with_the_default_logger(trainkit, tmp_path / "trainkit")
    theirs = fit_with_the_default_logger(pl, tmp_path / "lightning")
    # trainkit also writes last.ckpt (save_last=True, a choice in docs/compat.md)
    assert ours.pop("checkpoints") == [*theirs.pop("checkpoints"), "last.ckpt"]
    assert ours == theirs
    assert ours["loggers"] == ["TensorBoardLogger"] and ours["log_dir"] == ("version_0",)
    assert "metrics" not in ours["files"]
