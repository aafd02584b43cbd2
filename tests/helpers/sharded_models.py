"""A module that builds its layers in configure_model (Lightning's shard-first hook), and a
regression set for it: fsdp creates the layers on the meta device, ddp on the device; a probe of
fsdp's shard units, and a module that uses a parameter outside the layer holding it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from trainkit import Callback, DataModule, TrainModule


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


class ShardUnitProbe(Callback):
    """Writes, per rank, the names of the module's submodules that fsdp made shard units."""

    def on_train_start(self, trainer: Any, pl_module: Any) -> None:
        from torch.distributed.fsdp import FSDPModule

        units = [name for name, sub in pl_module.named_modules() if isinstance(sub, FSDPModule)]
        path = Path(trainer.default_root_dir) / f"units_rank{trainer.global_rank}.txt"
        path.write_text(" ".join(units))


class SharedEmbeddingHead(TrainModule):
    """Next-token logits from the embedding's own weight (``h @ embed.weight.T``): a parameter
    used outside the module that holds it."""

    def __init__(self, vocab: int = 5000, width: int = 256) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, width)  # 1.28M parameters: a unit by size
        self.mix = nn.Linear(width, width)

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        (tokens,) = batch
        logits = self.mix(self.embed(tokens)) @ self.embed.weight.T
        return F.cross_entropy(logits.flatten(0, 1), tokens.flatten())

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=0.1)


class TokenData(DataModule):
    """Random token sequences for SharedEmbeddingHead."""

    def __init__(self, vocab: int = 5000) -> None:
        super().__init__()
        self.save_hyperparameters()

    def train_dataloader(self) -> DataLoader:
        generator = torch.Generator().manual_seed(5)
        tokens = torch.randint(0, self.hparams.vocab, (32, 12), generator=generator)
        return DataLoader(TensorDataset(tokens), batch_size=8)
