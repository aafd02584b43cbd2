"""The small models and data Lightning's tests and bug reports start from: ``BoringModel``
(a linear layer on random 32-feature rows), ``BoringDataModule``, ``DemoModel``."""

from __future__ import annotations

import torch
from torch import Tensor
from torch.utils.data import DataLoader, Dataset, Subset

from trainkit.datamodule import DataModule
from trainkit.module import TrainModule


class RandomDataset(Dataset[Tensor]):
    """``length`` random rows of ``size`` features."""

    def __init__(self, size: int, length: int) -> None:
        self.len = length
        self.data = torch.randn(length, size)

    def __getitem__(self, index: int) -> Tensor:
        return self.data[index]

    def __len__(self) -> int:
        return self.len


class BoringModel(TrainModule):
    """A Linear(32, 2) pulled towards ones: subclass it and change the hook a report is about."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(32, 2)

    def forward(self, x: Tensor) -> Tensor:
        return self.layer(x)

    def loss(self, preds: Tensor, labels: Tensor | None = None) -> Tensor:
        """Mean squared distance from ``labels`` (ones by default)."""
        return torch.nn.functional.mse_loss(
            preds, torch.ones_like(preds) if labels is None else labels
        )

    def step(self, batch: Tensor) -> Tensor:
        return self.loss(self(batch))

    def training_step(self, batch: Tensor, batch_idx: int) -> dict[str, Tensor]:
        return {"loss": self.step(batch)}

    def validation_step(self, batch: Tensor, batch_idx: int) -> dict[str, Tensor]:
        return {"x": self.step(batch)}

    def test_step(self, batch: Tensor, batch_idx: int) -> dict[str, Tensor]:
        return {"y": self.step(batch)}

    def configure_optimizers(
        self,
    ) -> tuple[list[torch.optim.Optimizer], list[torch.optim.lr_scheduler.LRScheduler]]:
        optimizer = torch.optim.SGD(self.parameters(), lr=0.1)
        return [optimizer], [torch.optim.lr_scheduler.StepLR(optimizer, step_size=1)]

    def train_dataloader(self) -> DataLoader:
        return DataLoader(RandomDataset(32, 64))

    def val_dataloader(self) -> DataLoader:
        return DataLoader(RandomDataset(32, 64))

    def test_dataloader(self) -> DataLoader:
        return DataLoader(RandomDataset(32, 64))

    def predict_dataloader(self) -> DataLoader:
        return DataLoader(RandomDataset(32, 64))


class BoringDataModule(DataModule):
    """256 random rows: 64 each for training, validation, test and predict."""

    def __init__(self) -> None:
        super().__init__()
        self.random_full = RandomDataset(32, 64 * 4)

    def setup(self, stage: str) -> None:
        if stage == "fit":
            self.random_train = Subset(self.random_full, range(64))
        if stage in ("fit", "validate"):
            self.random_val = Subset(self.random_full, range(64, 128))
        if stage == "test":
            self.random_test = Subset(self.random_full, range(128, 192))
        if stage == "predict":
            self.random_predict = Subset(self.random_full, range(192, 256))

    def train_dataloader(self) -> DataLoader:
        return DataLoader(self.random_train)

    def val_dataloader(self) -> DataLoader:
        return DataLoader(self.random_val)

    def test_dataloader(self) -> DataLoader:
        return DataLoader(self.random_test)

    def predict_dataloader(self) -> DataLoader:
        return DataLoader(self.random_predict)


class DemoModel(TrainModule):
    """A Linear(32, out_dim) with ReLU, trained with Adam to shrink its outputs' sum."""

    def __init__(self, out_dim: int = 10, learning_rate: float = 0.02) -> None:
        super().__init__()
        self.l1 = torch.nn.Linear(32, out_dim)
        self.learning_rate = learning_rate

    def forward(self, x: Tensor) -> Tensor:
        return torch.relu(self.l1(x.view(x.size(0), -1)))

    def training_step(self, batch: Tensor, batch_idx: int) -> Tensor:
        return self(batch).sum()

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.Adam(self.parameters(), lr=self.learning_rate)
