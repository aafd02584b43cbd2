"""Lightning's Tuner and tuning callbacks on a tiny regression: an LR range test through
``Tuner.lr_find``, batch-size searches ('power' and 'binsearch', the size in the model or in
the datamodule's hparams) on a model that runs out of memory above 40 samples a batch, and a fit
with the ``LearningRateFinder`` callback.  Usage: tuner.py DEVICES"""

import sys

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import trainkit as pl  # under Lightning: import lightning.pytorch as pl
from tests.integration.compat.ported import write_result
from trainkit.callbacks import (  # under Lightning: from lightning.pytorch.callbacks import
    BatchSizeFinder,
    LearningRateFinder,
)
from trainkit.tuner import Tuner  # under Lightning: from lightning.pytorch.tuner import Tuner

DEVICES = int(sys.argv[1]) if len(sys.argv) > 1 else 1
MEMORY_LIMIT = 40  # samples a batch before the model "runs out of memory"


def regression_data() -> TensorDataset:
    generator = torch.Generator().manual_seed(3)
    x = torch.randn(256, 4, generator=generator)
    y = x @ torch.tensor([[1.0], [-2.0], [0.5], [3.0]]) + 0.1 * torch.randn(
        256, 1, generator=generator
    )
    return TensorDataset(x, y)


class Regressor(pl.LightningModule):
    """A linear layer fit by SGD at ``self.lr``; a batch over ``memory_limit`` samples raises the
    error a CPU allocator raises when memory runs out."""

    def __init__(self, lr: float = 0.01, batch_size: int = 8, memory_limit: int = 0) -> None:
        super().__init__()
        self.lr = lr
        self.batch_size = batch_size
        self.memory_limit = memory_limit
        self.layer = nn.Linear(4, 1)

    def training_step(self, batch, batch_idx):
        x, y = batch
        if self.memory_limit and len(x) > self.memory_limit:
            raise RuntimeError(
                "DefaultCPUAllocator: can't allocate memory: you tried to allocate "
                f"{len(x) << 30} bytes. Error code 12 (Cannot allocate memory)"
            )
        loss = F.mse_loss(self.layer(x), y)
        self.log("train_loss", loss, on_step=False, on_epoch=True)
        return loss

    def train_dataloader(self):
        return DataLoader(regression_data(), batch_size=self.batch_size)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.lr)


class SizedData(pl.LightningDataModule):
    """The loader's batch size is a hyperparameter of the datamodule."""

    def __init__(self, batch_size: int = 2) -> None:
        super().__init__()
        self.save_hyperparameters()

    def train_dataloader(self):
        return DataLoader(regression_data(), batch_size=self.hparams.batch_size)


class DataSized(Regressor):
    """Its loaders come from the datamodule."""

    def train_dataloader(self):
        raise AssertionError("the datamodule's loader is used")


def trainer(**options) -> pl.Trainer:
    return pl.Trainer(
        accelerator="cpu",
        devices=DEVICES,
        max_epochs=3,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        **options,
    )


def weights(model: nn.Module) -> list[float]:
    return [float(v) for p in model.parameters() for v in p.detach().flatten()]


def main() -> None:
    pl.seed_everything(7)
    model = Regressor()
    tuning = trainer()
    finder = Tuner(tuning).lr_find(model, min_lr=1e-5, max_lr=10.0, num_training=60)
    lr_find = {
        "lr": finder.results["lr"],
        "loss": finder.results["loss"],
        "suggestion": finder.suggestion(),
        "model_lr": model.lr,
        "weights": weights(model),  # as before the search
    }

    sizes = {}
    for mode in ("power", "binsearch"):
        model = Regressor(batch_size=2, memory_limit=MEMORY_LIMIT)
        found = Tuner(trainer()).scale_batch_size(model, mode=mode, steps_per_trial=2)
        sizes[mode] = [found, model.batch_size]
        data = SizedData()
        model = DataSized(memory_limit=MEMORY_LIMIT)
        found = Tuner(trainer()).scale_batch_size(model, datamodule=data, mode=mode, max_trials=4)
        sizes[f"{mode} datamodule"] = [found, data.hparams.batch_size]

    pl.seed_everything(7)
    model = Regressor()
    callback = LearningRateFinder(min_lr=1e-5, max_lr=10.0, num_training_steps=60)
    fitted = trainer(callbacks=[callback, BatchSizeFinder(max_trials=3)])
    fitted.fit(model)
    fit = {"model_lr": model.lr, "batch_size": model.batch_size, "weights": weights(model)}
    write_result(fitted, lr_find=lr_find, sizes=sizes, fit=fit, world=fitted.world_size)


if __name__ == "__main__":
    main()
