"""A LightningCLI that only builds the objects (run=False), shaped like Lightning's CLI docs:
the script parses its config, then calls fit and test itself. The model takes its optimizer and
scheduler by dependency injection (OptimizerCallable / LRSchedulerCallable), the CLI sets the
seed, Trainer defaults and a persistent EarlyStopping, and overwrites the saved config.

Usage: cli_run_false.py [-c config.yaml] [--trainer.max_epochs N] [--model.optimizer ...]
"""

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import trainkit as pl  # under Lightning: import lightning.pytorch as pl
from tests.integration.compat.ported import write_result
from trainkit.callbacks import EarlyStopping  # under Lightning: lightning.pytorch.callbacks
from trainkit.cli import (  # under Lightning: lightning.pytorch.cli
    LightningCLI,
    LRSchedulerCallable,
    OptimizerCallable,
)


class Waves(pl.LightningDataModule):
    """y = sin(x . w) + noise, split into train / val / test."""

    def __init__(self, num_samples: int = 384, num_features: int = 8, batch_size: int = 32) -> None:
        super().__init__()
        self.save_hyperparameters()

    def setup(self, stage: str) -> None:
        generator = torch.Generator().manual_seed(3)
        n, d = self.hparams.num_samples, self.hparams.num_features
        x = torch.randn(n, d, generator=generator)
        y = torch.sin(x @ torch.randn(d, 1, generator=generator)) + 0.05 * torch.randn(
            n, 1, generator=generator
        )
        third = n // 3
        self.splits = {
            "train": TensorDataset(x[: 2 * third - 32], y[: 2 * third - 32]),
            "val": TensorDataset(x[2 * third - 32 : 2 * third], y[2 * third - 32 : 2 * third]),
            "test": TensorDataset(x[2 * third :], y[2 * third :]),
        }

    def train_dataloader(self) -> DataLoader:
        return DataLoader(self.splits["train"], batch_size=self.hparams.batch_size, shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return DataLoader(self.splits["val"], batch_size=self.hparams.batch_size)

    def test_dataloader(self) -> DataLoader:
        return DataLoader(self.splits["test"], batch_size=self.hparams.batch_size)


class Regressor(pl.LightningModule):
    def __init__(
        self,
        optimizer: OptimizerCallable = torch.optim.Adam,
        scheduler: LRSchedulerCallable = torch.optim.lr_scheduler.ConstantLR,
        num_features: int = 8,
        hidden: int = 32,
    ) -> None:
        super().__init__()
        self.save_hyperparameters(ignore=["optimizer", "scheduler"])
        self.optimizer = optimizer
        self.scheduler = scheduler
        self.net = nn.Sequential(nn.Linear(num_features, hidden), nn.Tanh(), nn.Linear(hidden, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.mse_loss(self(x), y)
        self.log("train_loss", loss, on_step=False, on_epoch=True)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val_loss", F.mse_loss(self(x), y))

    def test_step(self, batch, batch_idx):
        x, y = batch
        self.log("test_loss", F.mse_loss(self(x), y))

    def configure_optimizers(self):
        optimizer = self.optimizer(self.parameters())
        return {"optimizer": optimizer, "lr_scheduler": self.scheduler(optimizer)}


def cli_main() -> None:
    cli = LightningCLI(
        Regressor,
        Waves,
        run=False,
        seed_everything_default=2024,
        save_config_kwargs={"overwrite": True},
        trainer_defaults={
            "accelerator": "cpu",
            "devices": 1,
            "max_epochs": 4,
            "logger": False,
            "enable_progress_bar": False,
            "enable_model_summary": False,
            "num_sanity_val_steps": 0,
            "default_root_dir": "runs",
            "callbacks": [EarlyStopping(monitor="val_loss", patience=50)],
        },
    )
    cli.trainer.fit(cli.model, datamodule=cli.datamodule)
    fit_metrics = {name: float(value) for name, value in cli.trainer.callback_metrics.items()}
    cli.trainer.test(cli.model, datamodule=cli.datamodule, verbose=False)
    write_result(
        cli.trainer,
        fit=fit_metrics,
        seed=cli.config["seed_everything"],
        optimizer=type(cli.trainer.optimizers[0]).__name__,
        lr=cli.trainer.optimizers[0].param_groups[0]["lr"],
        epochs=cli.trainer.current_epoch,
        early_stopping=sum(isinstance(c, EarlyStopping) for c in cli.trainer.callbacks),
        config_sections=sorted(vars(cli.config)),
        data=type(cli.datamodule).__name__,
    )


if __name__ == "__main__":
    cli_main()
