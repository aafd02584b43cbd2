"""A LightningCLI subclass that tests the fitted model in ``after_fit`` (a common recipe) and
reads ``_subcommand_method_arguments``, the Trainer method arguments of each subcommand.

Usage: cli_fit_then_test.py fit [--trainer.max_epochs N]
"""

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import trainkit as pl  # under Lightning: import lightning.pytorch as pl
from tests.integration.compat.ported import write_result
from trainkit.cli import LightningCLI  # under Lightning: lightning.pytorch.cli


class Line(pl.LightningModule):
    """y = 2x + 1 by one linear layer."""

    def __init__(self, lr: float = 0.1) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.layer = nn.Linear(1, 1)

    def loss(self, batch) -> torch.Tensor:
        x, y = batch
        return F.mse_loss(self.layer(x), y)

    def training_step(self, batch, batch_idx):
        return self.loss(batch)

    def test_step(self, batch, batch_idx):
        self.log("test_loss", self.loss(batch))

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr)


class LineData(pl.LightningDataModule):
    def __init__(self, batch_size: int = 8) -> None:
        super().__init__()
        self.batch_size = batch_size
        x = torch.linspace(-1, 1, 32).unsqueeze(1)
        self.data = TensorDataset(x, 2 * x + 1)

    def train_dataloader(self) -> DataLoader:
        return DataLoader(self.data, batch_size=self.batch_size)

    def test_dataloader(self) -> DataLoader:
        return DataLoader(self.data, batch_size=self.batch_size)


class FitThenTest(LightningCLI):
    def after_fit(self) -> None:
        self.arguments = {
            name: sorted(args) for name, args in self._subcommand_method_arguments.items()
        }
        self.trainer.test(self.model, datamodule=self.datamodule)


if __name__ == "__main__":
    cli = FitThenTest(
        Line,
        LineData,
        seed_everything_default=0,
        trainer_defaults={
            "max_epochs": 3,
            "logger": False,
            "enable_checkpointing": False,
            "enable_progress_bar": False,
            "enable_model_summary": False,
            "accelerator": "cpu",
        },
    )
    write_result(cli.trainer, method_arguments=cli.arguments)
