"""A LightningCLI over a family of models (subclass mode: --model picks one by class name) that
trains with the CLI's own optimizer and lr_scheduler sections: a ReduceLROnPlateau following
train_loss (the program has no validation set, so no val_loss exists). Per-subcommand defaults
come from a default config file, an EarlyStopping section is added by the CLI subclass, and a
SaveConfigCallback subclass reports the config it saved.

Usage (in a folder holding cli_plateau_defaults.yaml):
    cli_plateau.py fit --model MLPRegressor [--lr_scheduler.init_args.factor 0.5 ...]
"""

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import trainkit as pl  # under Lightning: import lightning.pytorch as pl
from tests.integration.compat.ported import write_result
from trainkit.callbacks import EarlyStopping  # under Lightning: lightning.pytorch.callbacks
from trainkit.cli import LightningCLI, SaveConfigCallback  # under Lightning: lightning.pytorch.cli


class Polynomial(pl.LightningDataModule):
    """y = x^3 - x + noise on [-2, 2]: train only (the model is judged on train_loss)."""

    def __init__(self, num_samples: int = 256, batch_size: int = 32) -> None:
        super().__init__()
        self.save_hyperparameters()

    def setup(self, stage: str) -> None:
        generator = torch.Generator().manual_seed(5)
        x = 4 * torch.rand(self.hparams.num_samples, 1, generator=generator) - 2
        y = x**3 - x + 0.1 * torch.randn(x.shape, generator=generator)
        self.train_set = TensorDataset(x, y)

    def train_dataloader(self) -> DataLoader:
        return DataLoader(self.train_set, batch_size=self.hparams.batch_size, shuffle=True)


class Regressor(pl.LightningModule):
    """The family's shared steps; subclasses build ``self.net``."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.mse_loss(self(x), y)
        self.log("train_loss", loss, on_step=False, on_epoch=True)
        return loss


class LinearRegressor(Regressor):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Linear(1, 1)


class MLPRegressor(Regressor):
    def __init__(self, hidden: int = 32) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(nn.Linear(1, hidden), nn.Tanh(), nn.Linear(hidden, 1))


class ReportingSaveConfig(SaveConfigCallback):
    """Also hands the saved config to the experiment tracker (here: remembers what it saw)."""

    def save_config(self, trainer, pl_module, stage: str) -> None:
        self.reported = {
            "stage": stage,
            "model": self.config["model"]["class_path"].rpartition(".")[2],
            "scheduler": self.config["lr_scheduler"]["class_path"].rpartition(".")[2],
        }


class PlateauCLI(LightningCLI):
    def add_arguments_to_parser(self, parser) -> None:
        parser.add_lightning_class_args(EarlyStopping, "early_stopping")
        parser.set_defaults(
            {"early_stopping.monitor": "train_loss", "early_stopping.patience": 100}
        )

    def after_fit(self) -> None:
        trainer = self.trainer
        (reporter,) = [c for c in trainer.callbacks if isinstance(c, ReportingSaveConfig)]
        scheduler = trainer.lr_scheduler_configs[0].scheduler
        write_result(
            trainer,
            lr=trainer.optimizers[0].param_groups[0]["lr"],
            scheduler=type(scheduler).__name__,
            monitor=scheduler.monitor,
            model=type(self.model).__name__,
            reported=getattr(reporter, "reported", None),  # save_config runs on rank 0 only
            early_stopping=[c.monitor for c in trainer.callbacks if isinstance(c, EarlyStopping)],
            epochs=trainer.current_epoch,
        )


def cli_main() -> None:
    PlateauCLI(
        Regressor,
        Polynomial,
        subclass_mode_model=True,
        save_config_callback=ReportingSaveConfig,
        parser_kwargs={"fit": {"default_config_files": ["cli_plateau_defaults.yaml"]}},
    )


if __name__ == "__main__":
    cli_main()
