"""An image-classifier-shaped program, like Lightning's MNIST examples with synthetic data:
torchmetrics objects in self.log, ModelCheckpoint on a metric, EarlyStopping, a scheduler in a
dict, LearningRateMonitor, then trainer.test(ckpt_path="best").  Usage: classifier.py DEVICES"""

import sys

import torch
import torch.nn.functional as F
import torchmetrics
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import trainkit as pl  # under Lightning: import lightning.pytorch as pl
from tests.integration.compat.ported import write_result
from trainkit.callbacks import (  # under Lightning: from lightning.pytorch.callbacks import
    EarlyStopping,
    LearningRateMonitor,
    ModelCheckpoint,
)
from trainkit.loggers import CSVLogger  # under Lightning: from lightning.pytorch.loggers import


class Blobs(pl.LightningDataModule):
    """Four Gaussian blobs in 16 dimensions, split into train/val/test."""

    def __init__(self, batch_size: int = 32, num_classes: int = 4) -> None:
        super().__init__()
        self.save_hyperparameters()

    def setup(self, stage: str) -> None:
        generator = torch.Generator().manual_seed(1)
        centers = 2.0 * torch.randn(self.hparams.num_classes, 16, generator=generator)
        labels = torch.arange(600) % self.hparams.num_classes
        points = centers[labels] + 1.5 * torch.randn(600, 16, generator=generator)
        data = TensorDataset(points, labels)
        self.train_set = torch.utils.data.Subset(data, range(0, 400))
        self.val_set = torch.utils.data.Subset(data, range(400, 500))
        self.test_set = torch.utils.data.Subset(data, range(500, 600))

    def train_dataloader(self) -> DataLoader:
        return DataLoader(self.train_set, batch_size=self.hparams.batch_size)

    def val_dataloader(self) -> DataLoader:
        return DataLoader(self.val_set, batch_size=self.hparams.batch_size)

    def test_dataloader(self) -> DataLoader:
        return DataLoader(self.test_set, batch_size=self.hparams.batch_size)


class Classifier(pl.LightningModule):
    def __init__(self, num_classes: int = 4, hidden: int = 32, lr: float = 0.05) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(nn.Linear(16, hidden), nn.ReLU(), nn.Linear(hidden, num_classes))
        self.val_acc = torchmetrics.Accuracy(task="multiclass", num_classes=num_classes)
        self.test_acc = torchmetrics.Accuracy(task="multiclass", num_classes=num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.cross_entropy(self(x), y)
        self.log("train_loss", loss, prog_bar=True)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        self.log("val_loss", F.cross_entropy(logits, y), prog_bar=True)
        self.val_acc(logits, y)
        self.log("val_acc", self.val_acc, prog_bar=True)

    def test_step(self, batch, batch_idx):
        x, y = batch
        self.test_acc(self(x), y)
        self.log("test_acc", self.test_acc)

    def configure_optimizers(self):
        optimizer = torch.optim.SGD(self.parameters(), lr=self.hparams.lr, momentum=0.9)
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
        return {
            "optimizer": optimizer,
            "lr_scheduler": {"scheduler": scheduler, "interval": "epoch"},
        }


def main() -> None:
    pl.seed_everything(0)
    checkpoint = ModelCheckpoint(monitor="val_acc", mode="max", filename="{epoch}-{val_acc:.3f}")
    trainer = pl.Trainer(
        accelerator="cpu",
        devices=int(sys.argv[1]),
        max_epochs=6,
        callbacks=[
            checkpoint,
            EarlyStopping(monitor="val_loss", patience=2),
            LearningRateMonitor(),
        ],
        logger=CSVLogger("logs"),
        enable_progress_bar=False,
        enable_model_summary=False,
    )
    model, data = Classifier(), Blobs()
    trainer.fit(model, datamodule=data)
    fitted = dict(trainer.callback_metrics)
    trainer.test(ckpt_path="best", datamodule=data, verbose=False)
    write_result(
        trainer,
        fit={name: float(value) for name, value in fitted.items()},
        best_score=float(checkpoint.best_model_score),
        epochs=trainer.current_epoch,
    )


if __name__ == "__main__":
    main()
