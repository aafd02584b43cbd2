"""After the Lightning tutorial "PyTorch Lightning CIFAR10 ~94% Baseline Tutorial"
(github.com/Lightning-AI/tutorials, lightning_examples/cifar10-baseline/baseline.py). The same
Lightning surface, written here in our own words (this repository holds no copy of public code).

What it keeps: ``seed_everything(7)`` at import; a ``LitResnet`` with ``save_hyperparameters()``,
``F.log_softmax`` outputs and ``nll_loss``, an ``evaluate(batch, stage)`` shared by validation
and test that logs ``{stage}_loss``/``{stage}_acc`` to the bar with torchmetrics' functional
``accuracy``; ``configure_optimizers`` returning SGD with a ``OneCycleLR`` built from
``self.trainer.max_epochs`` in a dict with ``"interval": "step"``; a ``Trainer`` with
``TensorBoardLogger("lightning_logs/", name="resnet")``, ``LearningRateMonitor(
logging_interval="step")`` and ``TQDMProgressBar`` imported from ``callbacks.progress``;
``fit(model, datamodule)`` with the data module positional, then ``test(model, datamodule=...)``.
Then the bonus stage: ``SWAResnet(LitResnet)`` wrapping the trained network in
``torch.optim.swa_utils.AveragedModel``, ``save_hyperparameters("lr")`` after the parent's own
call, a ``validation_step`` with an extra ``stage=None`` argument, the average updated in
``on_train_epoch_end``, ``update_bn`` over ``self.trainer.datamodule.train_dataloader()`` in
``on_train_end``, ``swa_model.datamodule = cifar10_dm`` set by the script, and a second Trainer.
What differs: pl_bolts' ``CIFAR10DataModule`` (a download, torchvision transforms) is replaced
by a data module of 3x32x32 synthetic images of the same shape and split (``prepare_data``,
``setup`` holding out a validation set with a seeded split), 640 training images instead of
50,000 (so ``steps_per_epoch`` is 576 // BATCH_SIZE), data loading in the main process, a
small BatchNorm CNN in place of torchvision's ``resnet18`` (not installed here), 2 epochs a
stage instead of 30 and 20, and a ``write_result`` call for the test.

Usage: cifar10_baseline.py
"""

import os

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.optim.lr_scheduler import OneCycleLR
from torch.optim.swa_utils import AveragedModel, update_bn
from torch.utils.data import DataLoader, TensorDataset, random_split
from torchmetrics.functional import accuracy

from tests.integration.compat.ported import write_result
from trainkit import LightningDataModule, LightningModule, Trainer, seed_everything
from trainkit.callbacks import LearningRateMonitor
from trainkit.callbacks.progress import TQDMProgressBar
from trainkit.loggers import TensorBoardLogger

seed_everything(7)

PATH_DATASETS = os.environ.get("PATH_DATASETS", ".")
BATCH_SIZE = 64
NUM_WORKERS = 0


class SyntheticCIFAR10(LightningDataModule):
    """Stands in for pl_bolts' CIFAR10DataModule: normalised 3x32x32 images, labels 0-9."""

    def __init__(self, data_dir: str = ".", batch_size: int = 32, num_workers: int = 0) -> None:
        super().__init__()
        self.data_dir = data_dir
        self.batch_size = batch_size
        self.num_workers = num_workers

    @staticmethod
    def images(count: int, seed: int) -> TensorDataset:
        colours = torch.randn(10, 3, 1, 1, generator=torch.Generator().manual_seed(0))
        generator = torch.Generator().manual_seed(seed)
        labels = torch.randint(0, 10, (count,), generator=generator)
        noise = torch.randn(count, 3, 32, 32, generator=generator)
        return TensorDataset(0.5 * colours[labels] + noise, labels)

    def prepare_data(self) -> None:
        pass  # CIFAR10(self.data_dir, download=True) in the original

    def setup(self, stage: str | None = None) -> None:
        if stage in ("fit", "validate", None):
            self.dataset_train, self.dataset_val = random_split(
                self.images(640, seed=1), [576, 64], generator=torch.Generator().manual_seed(42)
            )
        if stage in ("test", None):
            self.dataset_test = self.images(128, seed=2)

    def train_dataloader(self) -> DataLoader:
        return DataLoader(
            self.dataset_train,
            batch_size=self.batch_size,
            shuffle=True,
            num_workers=self.num_workers,
            drop_last=True,
        )

    def val_dataloader(self) -> DataLoader:
        return DataLoader(self.dataset_val, batch_size=self.batch_size)

    def test_dataloader(self) -> DataLoader:
        return DataLoader(self.dataset_test, batch_size=self.batch_size)


cifar10_dm = SyntheticCIFAR10(
    data_dir=PATH_DATASETS, batch_size=BATCH_SIZE, num_workers=NUM_WORKERS
)


def create_model():
    return nn.Sequential(
        nn.Conv2d(3, 16, kernel_size=3, padding=1, bias=False),
        nn.BatchNorm2d(16),
        nn.ReLU(),
        nn.MaxPool2d(4),
        nn.Conv2d(16, 32, kernel_size=3, padding=1, bias=False),
        nn.BatchNorm2d(32),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(32, 10),
    )


class LitResnet(LightningModule):
    def __init__(self, lr=0.05):
        super().__init__()
        self.save_hyperparameters()
        self.model = create_model()

    def forward(self, x):
        return F.log_softmax(self.model(x), dim=1)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.nll_loss(self(x), y)
        self.log("train_loss", loss)
        return loss

    def evaluate(self, batch, stage=None):
        x, y = batch
        logits = self(x)
        loss = F.nll_loss(logits, y)
        preds = torch.argmax(logits, dim=1)
        acc = accuracy(preds, y, task="multiclass", num_classes=10)
        if stage:
            self.log(f"{stage}_loss", loss, prog_bar=True)
            self.log(f"{stage}_acc", acc, prog_bar=True)

    def validation_step(self, batch, batch_idx):
        self.evaluate(batch, "val")

    def test_step(self, batch, batch_idx):
        self.evaluate(batch, "test")

    def configure_optimizers(self):
        optimizer = torch.optim.SGD(
            self.parameters(), lr=self.hparams.lr, momentum=0.9, weight_decay=5e-4
        )
        steps_per_epoch = 576 // BATCH_SIZE
        scheduler_dict = {
            "scheduler": OneCycleLR(
                optimizer, 0.1, epochs=self.trainer.max_epochs, steps_per_epoch=steps_per_epoch
            ),
            "interval": "step",
        }
        return {"optimizer": optimizer, "lr_scheduler": scheduler_dict}


model = LitResnet(lr=0.05)
trainer = Trainer(
    max_epochs=2,
    accelerator="auto",
    logger=TensorBoardLogger("lightning_logs/", name="resnet"),
    callbacks=[LearningRateMonitor(logging_interval="step"), TQDMProgressBar(refresh_rate=10)],
)
trainer.fit(model, cifar10_dm)
first_fit = {name: float(value) for name, value in trainer.callback_metrics.items()}
trainer.test(model, datamodule=cifar10_dm)
first_test = {name: float(value) for name, value in trainer.callback_metrics.items()}


class SWAResnet(LitResnet):
    def __init__(self, trained_model, lr=0.01):
        super().__init__()
        self.save_hyperparameters("lr")
        self.model = trained_model
        self.swa_model = AveragedModel(self.model)

    def forward(self, x):
        return F.log_softmax(self.swa_model(x), dim=1)

    def on_train_epoch_end(self):
        self.swa_model.update_parameters(self.model)

    def validation_step(self, batch, batch_idx, stage=None):
        x, y = batch
        logits = F.log_softmax(self.model(x), dim=1)
        loss = F.nll_loss(logits, y)
        preds = torch.argmax(logits, dim=1)
        acc = accuracy(preds, y, task="multiclass", num_classes=10)
        self.log("val_loss", loss, prog_bar=True)
        self.log("val_acc", acc, prog_bar=True)

    def configure_optimizers(self):
        return torch.optim.SGD(
            self.model.parameters(), lr=self.hparams.lr, momentum=0.9, weight_decay=5e-4
        )

    def on_train_end(self):
        update_bn(self.trainer.datamodule.train_dataloader(), self.swa_model, device=self.device)


swa_model = SWAResnet(model.model, lr=0.01)
swa_model.datamodule = cifar10_dm

swa_trainer = Trainer(
    max_epochs=2,
    accelerator="auto",
    logger=TensorBoardLogger("lightning_logs/", name="swa_resnet"),
    callbacks=[TQDMProgressBar(refresh_rate=20)],
)
swa_trainer.fit(swa_model, cifar10_dm)
swa_fit = {name: float(value) for name, value in swa_trainer.callback_metrics.items()}
swa_trainer.test(swa_model, datamodule=cifar10_dm)
write_result(
    swa_trainer,
    first_fit=first_fit,
    first_test=first_test,
    swa_fit=swa_fit,
    swa_hparams={k: v for k, v in swa_model.hparams.items() if isinstance(v, float | int)},
    averaged=int(swa_model.swa_model.n_averaged),
    bn_mean=float(swa_model.swa_model.module[1].running_mean.sum()),
    log_dirs=[trainer.logger.log_dir, swa_trainer.logger.log_dir],
)
