"""A small autoencoder on synthetic low-rank data generated in memory (no download)."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

from trainkit.datamodule import DataModule
from trainkit.errors import ConfigError
from trainkit.module import TrainModule


class SyntheticDataModule(DataModule):
    """Points near a random low-dimensional subspace: an autoencoder can learn to compress them."""

    def __init__(
        self,
        num_samples: int = 2048,
        features: int = 32,
        rank: int = 4,
        noise: float = 0.05,
        batch_size: int = 64,
        val_fraction: float = 0.125,
        shuffle: bool = True,
        num_workers: int = 0,
        data_seed: int = 1234,
    ) -> None:
        """
        Args:
            num_samples: Points generated in total (train + val); test/predict get a fresh set.
            features: Dimension of each point.
            rank: Dimension of the subspace the points lie near.
            noise: Standard deviation of the Gaussian noise added to each point.
            batch_size: Samples per batch on each device.
            val_fraction: Share of the points held out for validation.
            shuffle: Shuffle the training set each epoch.
            num_workers: DataLoader worker processes.
            data_seed: Seed of the data generator (independent of the training seed).
        """
        for name, value in (("num_samples", num_samples), ("features", features)):
            _check_positive(f"data.{name}", value)
        _check_positive("data.batch_size", batch_size)
        super().__init__()
        self.save_hyperparameters()
        self.train_set = self.val_set = self.test_set = None

    def _points(self, count: int, generator: torch.Generator) -> torch.Tensor:
        h = self.hparams
        basis = torch.randn(
            h.rank, h.features, generator=torch.Generator().manual_seed(h.data_seed)
        )
        codes = torch.randn(count, h.rank, generator=generator)
        return codes @ basis / h.rank**0.5 + h.noise * torch.randn(
            count, h.features, generator=generator
        )

    def setup(self, stage: str) -> None:
        h = self.hparams
        generator = torch.Generator().manual_seed(h.data_seed + 1)
        points = self._points(h.num_samples, generator)
        n_val = int(h.num_samples * h.val_fraction)
        self.train_set = TensorDataset(points[n_val:])
        self.val_set = TensorDataset(points[:n_val])
        self.test_set = TensorDataset(self._points(max(n_val, h.batch_size), generator))

    def _loader(self, dataset: TensorDataset | None, shuffle: bool = False) -> DataLoader:
        if dataset is None:
            raise RuntimeError("the datasets are made in setup(); call setup(stage) first")
        return DataLoader(
            dataset,
            batch_size=self.hparams.batch_size,
            shuffle=shuffle,
            num_workers=self.hparams.num_workers,
        )

    def train_dataloader(self) -> DataLoader:
        return self._loader(self.train_set, shuffle=self.hparams.shuffle)

    def val_dataloader(self) -> DataLoader:
        return self._loader(self.val_set)

    def test_dataloader(self) -> DataLoader:
        return self._loader(self.test_set)

    def predict_dataloader(self) -> DataLoader:
        return self._loader(self.test_set)


class AutoEncoder(TrainModule):
    """An MLP encoder/decoder trained to reconstruct its input (mean squared error)."""

    def __init__(
        self, features: int = 32, hidden: int = 64, latent: int = 4, lr: float = 0.01
    ) -> None:
        """
        Args:
            features: Input (and output) dimension; must match the data.
            hidden: Width of the hidden layer of the encoder and the decoder.
            latent: Size of the code the input is compressed to.
            lr: Learning rate of the Adam optimizer (when no optimizer section is given).
        """
        for name, value in (("features", features), ("hidden", hidden), ("latent", latent)):
            _check_positive(f"model.{name}", value)
        if not lr > 0:
            raise ConfigError("model.lr", lr, "a learning rate > 0")
        super().__init__()
        self.save_hyperparameters()
        self.encoder = nn.Sequential(
            nn.Linear(features, hidden), nn.ReLU(), nn.Linear(hidden, latent)
        )
        self.decoder = nn.Sequential(
            nn.Linear(latent, hidden), nn.ReLU(), nn.Linear(hidden, features)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.decoder(self.encoder(x))

    def _loss(self, batch: list[torch.Tensor]) -> torch.Tensor:
        x = batch[0]
        return F.mse_loss(self(x), x)

    def training_step(self, batch: list[torch.Tensor], batch_idx: int) -> torch.Tensor:
        loss = self._loss(batch)
        self.log("train_loss", loss, prog_bar=True)
        return loss

    def validation_step(self, batch: list[torch.Tensor], batch_idx: int) -> None:
        self.log("val_loss", self._loss(batch), prog_bar=True, sync_dist=True)

    def test_step(self, batch: list[torch.Tensor], batch_idx: int) -> None:
        self.log("test_loss", self._loss(batch), sync_dist=True)

    def predict_step(self, batch: list[torch.Tensor], batch_idx: int) -> torch.Tensor:
        return self.encoder(batch[0])

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.parameters(), lr=self.hparams.lr)


class SequentialAutoEncoder(AutoEncoder):
    """The autoencoder as one ``nn.Sequential`` of 6 layers, so strategy: pipeline can split it."""

    def __init__(
        self, features: int = 32, hidden: int = 64, latent: int = 4, lr: float = 0.01
    ) -> None:
        """
        Args:
            features: Input (and output) dimension; must match the data.
            hidden: Width of the hidden layers.
            latent: Size of the code the input is compressed to.
            lr: Learning rate of the Adam optimizer (when no optimizer section is given).
        """
        super().__init__(features, hidden, latent, lr)
        self.sequential_module = nn.Sequential(*self.encoder, *self.decoder)
        del self.encoder, self.decoder

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.sequential_module(x)

    def predict_step(self, batch: list[torch.Tensor], batch_idx: int) -> torch.Tensor:
        return self(batch[0])

    def pipeline_batch(self, batch: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor]:
        """An autoencoder's target is its input."""
        return batch[0], batch[0]

    def pipeline_loss(self, output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return F.mse_loss(output, target)


def _check_positive(name: str, value: int) -> None:
    if value < 1:
        raise ConfigError(name, value, "an int >= 1")
