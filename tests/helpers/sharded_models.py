"""A module that builds its layers in configure_model (Lightning's shard-first hook), and a
regression set for it: fsdp creates the layers on the meta device, ddp on the device."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from trainkit import DataModule, TrainModule


class LayerStack(TrainModule):
    """``depth`` Linear(width, width) layers, created in configure_model; SGD on an MSE."""

    def __init__(self, width: int = 32, depth: int = 4, lr: float = 0.05) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.layers: nn.Module | None = None
        self.configured = 0

    def configure_model(self) -> None:
        self.configured += 1
        if self.layers is not None:
            return
        width = self.hparams.width
        self.layers = nn.Sequential(*[nn.Linear(width, width) for _ in range(self.hparams.depth)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        loss = F.mse_loss(self(x), y)
        self.log("train_loss", loss)
        return loss

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr)


class StackData(DataModule):
    """Fixed random inputs and targets for LayerStack."""

    def __init__(self, width: int = 32, samples: int = 64, batch_size: int = 8) -> None:
        super().__init__()
        self.save_hyperparameters()

    def train_dataloader(self) -> DataLoader:
        generator = torch.Generator().manual_seed(3)
        x = torch.randn(self.hparams.samples, self.hparams.width, generator=generator)
        y = torch.randn(self.hparams.samples, self.hparams.width, generator=generator)
        return DataLoader(TensorDataset(x, y), batch_size=self.hparams.batch_size)
