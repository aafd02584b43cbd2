"""A classifier that logs torchmetrics objects, as Lightning programs do, and data to check it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import torch
import torchmetrics
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

from trainkit import Callback, DataModule, TrainModule

CLASSES = 3


def blobs(samples: int, seed: int) -> TensorDataset:
    """Three noisy Gaussian blobs in 2-D: learnable, never perfectly."""
    generator = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, CLASSES, (samples,), generator=generator)
    centers = torch.tensor([[0.0, 0.0], [2.0, 0.0], [0.0, 2.0]])
    points = centers[labels] + 1.2 * torch.randn(samples, 2, generator=generator)
    return TensorDataset(points, labels)


class Blobs(DataModule):
    def __init__(self, batch_size: int = 16, val_samples: int = 200) -> None:
        super().__init__()
        self.batch_size, self.val_samples = batch_size, val_samples

    def train_dataloader(self):
        return DataLoader(blobs(256, 0), batch_size=self.batch_size, shuffle=True)

    def val_dataloader(self):
        return DataLoader(blobs(self.val_samples, 1), batch_size=self.batch_size)


class MetricClassifier(TrainModule):
    """Logs torchmetrics objects: accuracy per step and epoch in training, a collection in
    validation (accuracy and macro F1), each with its own state."""

    def __init__(self, lr: float = 0.1) -> None:
        super().__init__()
        self.lr = lr
        self.layer = torch.nn.Linear(2, CLASSES)
        self.train_acc = torchmetrics.Accuracy(task="multiclass", num_classes=CLASSES)
        self.val_acc = torchmetrics.Accuracy(task="multiclass", num_classes=CLASSES)
        self.val_metrics = torchmetrics.MetricCollection(
            {
                "val_f1": torchmetrics.F1Score(
                    task="multiclass", num_classes=CLASSES, average="macro"
                )
            }
        )
        self.step_accuracies: list[float] = []

    def forward(self, x):
        return self.layer(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        batch_acc = self.train_acc(logits, y)
        self.step_accuracies.append(float(batch_acc))
        self.log("train_acc", self.train_acc, on_step=True, on_epoch=True)
        return F.cross_entropy(logits, y)

    def validation_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        self.val_acc.update(logits, y)
        self.log("val_acc", self.val_acc)
        self.val_metrics.update(logits, y)
        self.log_dict(self.val_metrics)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.lr)


def full_dataset_scores(module: MetricClassifier, dataset: TensorDataset) -> dict[str, float]:
    """The validation metrics computed in one go over the whole dataset, with plain torch."""
    x, y = dataset.tensors
    with torch.no_grad():
        predicted = module(x).argmax(1)
    f1 = []
    for c in range(CLASSES):
        tp = ((predicted == c) & (y == c)).sum().item()
        fp = ((predicted == c) & (y != c)).sum().item()
        fn = ((predicted != c) & (y == c)).sum().item()
        f1.append(2 * tp / (2 * tp + fp + fn) if tp + fp + fn else 0.0)
    return {"val_acc": (predicted == y).float().mean().item(), "val_f1": sum(f1) / CLASSES}


class ScoreProbe(Callback):
    """On global rank 0 at fit end: the logged epoch values and the full-dataset reference."""

    def __init__(self, path: str = "scores.json") -> None:
        self.path = path

    def on_fit_end(self, trainer, module):
        if trainer.global_rank != 0:
            return
        logged = {k: float(trainer.callback_metrics[k]) for k in ("val_acc", "val_f1")}
        reference = full_dataset_scores(module, blobs(trainer.datamodule.val_samples, 1))
        record = {
            "logged": logged,
            "reference": reference,
            "world": int(os.environ.get("WORLD_SIZE", 1)),
        }
        Path(self.path).write_text(json.dumps(record))
