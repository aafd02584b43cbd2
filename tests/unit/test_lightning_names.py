"""Lightning's names for the user-facing classes, so code written with ``import ... as pl``
runs after changing only the import."""

from __future__ import annotations

import torch
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

import trainkit as pl


def test_lightning_names_are_the_same_classes():
    assert pl.LightningModule is pl.TrainModule
    assert pl.LightningDataModule is pl.DataModule
    assert {"LightningModule", "LightningDataModule"} <= set(dir(pl))


def test_a_lightning_module_and_datamodule_train_unchanged(tmp_path):
    class Data(pl.LightningDataModule):
        def train_dataloader(self):
            x = torch.randn(64, 4)
            return DataLoader(TensorDataset(x, x.sum(1, keepdim=True)), batch_size=16)

    class Model(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(4, 1)

        def training_step(self, batch, batch_idx):
            x, y = batch
            loss = F.mse_loss(self.layer(x), y)
            self.log("train_loss", loss)
            return loss

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.05)

    trainer = pl.Trainer(
        accelerator="cpu", max_epochs=2, default_root_dir=str(tmp_path), enable_progress_bar=False
    )
    trainer.fit(Model(), datamodule=Data())
    assert trainer.global_step == 8 and "train_loss" in trainer.callback_metrics
