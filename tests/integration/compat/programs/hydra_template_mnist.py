"""After ashleve/lightning-hydra-template (github.com/ashleve/lightning-hydra-template):
``src/models/mnist_module.py``, ``src/data/mnist_datamodule.py``,
``src/models/components/simple_dense_net.py`` and ``src/train.py`` with the objects its default
configs build (``configs/train.yaml``: callbacks/default.yaml, logger/csv.yaml, trainer/cpu.yaml,
model/mnist.yaml). The same Lightning surface, written here in our own words (this repository
holds no copy of public code); Hydra's ``instantiate`` is replaced by building the same objects,
``_partial_: true`` by ``functools.partial``.

What it keeps: a module taking ``net``, a partial ``optimizer``, a partial ``scheduler`` and
``compile``, saved with ``save_hyperparameters(logger=False)``; torchmetrics ``Accuracy``,
``MeanMetric`` and ``MaxMetric`` objects logged under ``train/``, ``val/``, ``test/`` names; the
validation metrics reset in ``on_train_start``; ``val/acc_best`` logged from
``on_validation_epoch_end`` with ``sync_dist=True``; ``setup(stage)`` on the module;
``ReduceLROnPlateau`` returned in a dict monitoring ``val/loss``; a data module with
``prepare_data``, ``setup(stage)`` that splits once and divides the batch by
``self.trainer.world_size``, ``teardown``, ``state_dict`` and ``load_state_dict``; the default
callbacks (``ModelCheckpoint`` on ``val/acc`` with ``filename="epoch_{epoch:03d}"``,
``auto_insert_metric_name=False`` and ``save_last=True``, ``EarlyStopping`` on ``val/acc``,
``RichModelSummary(max_depth=-1)``, ``RichProgressBar``), a ``CSVLogger``,
``logger.log_hyperparams`` of the run's settings, ``fit`` then ``test`` on
``trainer.checkpoint_callback.best_model_path``.
What differs: 28x28 synthetic "digits" (ten fixed templates plus noise, already normalised),
1,024 images instead of MNIST's 70,000 (no download), and a ``write_result`` call for the test.

Usage: hydra_template_mnist.py [MAX_EPOCHS]
"""

import itertools
import sys
from functools import partial
from typing import Any

import torch
from torch import nn
from torch.utils.data import ConcatDataset, DataLoader, Dataset, TensorDataset, random_split
from torchmetrics import MaxMetric, MeanMetric
from torchmetrics.classification.accuracy import Accuracy

import trainkit as L  # under Lightning: import lightning.pytorch as L
from tests.integration.compat.ported import write_result
from trainkit import LightningDataModule, LightningModule
from trainkit.callbacks import (
    EarlyStopping,
    ModelCheckpoint,
    RichModelSummary,
    RichProgressBar,
)
from trainkit.loggers import CSVLogger

OUTPUT_DIR = "logs/train/runs/0"  # Hydra's ${hydra:runtime.output_dir}


def synthetic_digits(count: int, seed: int) -> TensorDataset:
    """Stands in for torchvision's MNIST with ToTensor and Normalize((0.1307,), (0.3081,))."""
    templates = torch.rand(10, 1, 28, 28, generator=torch.Generator().manual_seed(0))
    generator = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, 10, (count,), generator=generator)
    pixels = 0.15 * templates[labels] + 0.85 * torch.rand(count, 1, 28, 28, generator=generator)
    return TensorDataset((pixels - 0.1307) / 0.3081, labels)


class SimpleDenseNet(nn.Module):
    """Three Linear-BatchNorm-ReLU blocks and a linear output over the flattened image."""

    def __init__(
        self,
        input_size: int = 784,
        lin1_size: int = 256,
        lin2_size: int = 256,
        lin3_size: int = 256,
        output_size: int = 10,
    ) -> None:
        super().__init__()
        sizes = [input_size, lin1_size, lin2_size, lin3_size]
        blocks: list[nn.Module] = []
        for inputs, outputs in itertools.pairwise(sizes):
            blocks += [nn.Linear(inputs, outputs), nn.BatchNorm1d(outputs), nn.ReLU()]
        self.model = nn.Sequential(*blocks, nn.Linear(lin3_size, output_size))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.model(x.view(x.size(0), -1))


class MNISTLitModule(LightningModule):
    def __init__(
        self,
        net: torch.nn.Module,
        optimizer: Any,
        scheduler: Any,
        compile: bool,
    ) -> None:
        super().__init__()
        self.save_hyperparameters(logger=False)
        self.net = net
        self.criterion = torch.nn.CrossEntropyLoss()
        # one metric object per stage, so each reduces over its own epoch
        self.train_acc = Accuracy(task="multiclass", num_classes=10)
        self.val_acc = Accuracy(task="multiclass", num_classes=10)
        self.test_acc = Accuracy(task="multiclass", num_classes=10)
        self.train_loss = MeanMetric()
        self.val_loss = MeanMetric()
        self.test_loss = MeanMetric()
        self.val_acc_best = MaxMetric()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def on_train_start(self) -> None:
        # the sanity check ran validation steps: forget what they accumulated
        self.val_loss.reset()
        self.val_acc.reset()
        self.val_acc_best.reset()

    def model_step(self, batch):
        x, y = batch
        logits = self.forward(x)
        return self.criterion(logits, y), torch.argmax(logits, dim=1), y

    def training_step(self, batch, batch_idx: int) -> torch.Tensor:
        loss, preds, targets = self.model_step(batch)
        self.train_loss(loss)
        self.train_acc(preds, targets)
        self.log("train/loss", self.train_loss, on_step=False, on_epoch=True, prog_bar=True)
        self.log("train/acc", self.train_acc, on_step=False, on_epoch=True, prog_bar=True)
        return loss

    def on_train_epoch_end(self) -> None:
        pass

    def validation_step(self, batch, batch_idx: int) -> None:
        loss, preds, targets = self.model_step(batch)
        self.val_loss(loss)
        self.val_acc(preds, targets)
        self.log("val/loss", self.val_loss, on_step=False, on_epoch=True, prog_bar=True)
        self.log("val/acc", self.val_acc, on_step=False, on_epoch=True, prog_bar=True)

    def on_validation_epoch_end(self) -> None:
        self.val_acc_best(self.val_acc.compute())
        # a value, not the metric object: Lightning would reset the object each epoch
        self.log("val/acc_best", self.val_acc_best.compute(), sync_dist=True, prog_bar=True)

    def test_step(self, batch, batch_idx: int) -> None:
        loss, preds, targets = self.model_step(batch)
        self.test_loss(loss)
        self.test_acc(preds, targets)
        self.log("test/loss", self.test_loss, on_step=False, on_epoch=True, prog_bar=True)
        self.log("test/acc", self.test_acc, on_step=False, on_epoch=True, prog_bar=True)

    def on_test_epoch_end(self) -> None:
        pass

    def setup(self, stage: str) -> None:
        if self.hparams.compile and stage == "fit":
            self.net = torch.compile(self.net)

    def configure_optimizers(self) -> dict[str, Any]:
        optimizer = self.hparams.optimizer(params=self.trainer.model.parameters())
        if self.hparams.scheduler is not None:
            scheduler = self.hparams.scheduler(optimizer=optimizer)
            return {
                "optimizer": optimizer,
                "lr_scheduler": {
                    "scheduler": scheduler,
                    "monitor": "val/loss",
                    "interval": "epoch",
                    "frequency": 1,
                },
            }
        return {"optimizer": optimizer}


class MNISTDataModule(LightningDataModule):
    def __init__(
        self,
        data_dir: str = "data/",
        train_val_test_split: tuple[int, int, int] = (768, 128, 128),
        batch_size: int = 64,
        num_workers: int = 0,
        pin_memory: bool = False,
    ) -> None:
        super().__init__()
        self.save_hyperparameters(logger=False)
        self.data_train: Dataset | None = None
        self.data_val: Dataset | None = None
        self.data_test: Dataset | None = None
        self.batch_size_per_device = batch_size
        self.prepared = 0

    @property
    def num_classes(self) -> int:
        return 10

    def prepare_data(self) -> None:
        self.prepared += 1  # where MNIST(download=True) would fetch the files

    def setup(self, stage: str | None = None) -> None:
        if self.trainer is not None:
            if self.hparams.batch_size % self.trainer.world_size != 0:
                raise RuntimeError(
                    f"Batch size ({self.hparams.batch_size}) is not divisible by the number "
                    f"of devices ({self.trainer.world_size})."
                )
            self.batch_size_per_device = self.hparams.batch_size // self.trainer.world_size
        if not self.data_train and not self.data_val and not self.data_test:
            dataset = ConcatDataset(datasets=[synthetic_digits(896, 1), synthetic_digits(128, 2)])
            self.data_train, self.data_val, self.data_test = random_split(
                dataset=dataset,
                lengths=self.hparams.train_val_test_split,
                generator=torch.Generator().manual_seed(42),
            )

    def loader(self, dataset, shuffle: bool) -> DataLoader:
        return DataLoader(
            dataset=dataset,
            batch_size=self.batch_size_per_device,
            num_workers=self.hparams.num_workers,
            pin_memory=self.hparams.pin_memory,
            shuffle=shuffle,
        )

    def train_dataloader(self) -> DataLoader:
        return self.loader(self.data_train, shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return self.loader(self.data_val, shuffle=False)

    def test_dataloader(self) -> DataLoader:
        return self.loader(self.data_test, shuffle=False)

    def teardown(self, stage: str | None = None) -> None:
        pass

    def state_dict(self) -> dict[Any, Any]:
        return {}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        pass


def log_hyperparameters(settings: dict, model: LightningModule, trainer) -> None:
    """The template's ``utils.log_hyperparameters``: the run's settings and parameter counts."""
    hparams = dict(settings)
    hparams["model/params/total"] = sum(p.numel() for p in model.parameters())
    hparams["model/params/trainable"] = sum(
        p.numel() for p in model.parameters() if p.requires_grad
    )
    hparams["model/params/non_trainable"] = sum(
        p.numel() for p in model.parameters() if not p.requires_grad
    )
    for logger in trainer.loggers:
        logger.log_hyperparams(hparams)


def train(max_epochs: int) -> None:
    L.seed_everything(12345, workers=True)
    datamodule = MNISTDataModule(batch_size=64)
    model = MNISTLitModule(
        net=SimpleDenseNet(input_size=784, lin1_size=64, lin2_size=128, lin3_size=64),
        optimizer=partial(torch.optim.Adam, lr=0.001, weight_decay=0.0),
        scheduler=partial(torch.optim.lr_scheduler.ReduceLROnPlateau, mode="min", factor=0.1),
        compile=False,
    )
    callbacks = [
        ModelCheckpoint(
            dirpath=f"{OUTPUT_DIR}/checkpoints",
            filename="epoch_{epoch:03d}",
            monitor="val/acc",
            mode="max",
            save_last=True,
            auto_insert_metric_name=False,
        ),
        EarlyStopping(monitor="val/acc", patience=100, mode="max"),
        RichModelSummary(max_depth=-1),
        RichProgressBar(),
    ]
    logger = [CSVLogger(save_dir=OUTPUT_DIR, name="csv/", prefix="")]
    trainer = L.Trainer(
        default_root_dir=OUTPUT_DIR,
        min_epochs=1,
        max_epochs=max_epochs,
        accelerator="cpu",
        devices=1,
        check_val_every_n_epoch=1,
        deterministic=False,
        callbacks=callbacks,
        logger=logger,
    )
    log_hyperparameters({"seed": 12345, "task_name": "train"}, model, trainer)
    trainer.fit(model=model, datamodule=datamodule, ckpt_path=None)
    train_metrics = {name: float(value) for name, value in trainer.callback_metrics.items()}
    ckpt_path = trainer.checkpoint_callback.best_model_path
    if ckpt_path == "":
        ckpt_path = None
    # weights_only=False: the checkpoint's hyperparameters hold the pickled ``net``, which
    # Lightning 2.6 on torch >= 2.6 refuses to load otherwise (the template predates that)
    trainer.test(model=model, datamodule=datamodule, ckpt_path=ckpt_path, weights_only=False)
    write_result(
        trainer,
        fit=train_metrics,
        best=ckpt_path.rpartition("/")[2],
        best_score=float(trainer.checkpoint_callback.best_model_score),
        prepared=datamodule.prepared,
        batch_size_per_device=datamodule.batch_size_per_device,
        lr=trainer.optimizers[0].param_groups[0]["lr"],
        epochs=trainer.current_epoch,
        log_dir=trainer.logger.log_dir,
    )


if __name__ == "__main__":
    train(int(sys.argv[1]) if len(sys.argv) > 1 else 10)
