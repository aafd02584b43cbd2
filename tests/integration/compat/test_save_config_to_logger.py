"""A ``SaveConfigCallback`` subclass that sends the config to the logger (Lightning's
documented ``LoggerSaveConfigCallback``): TensorBoardLogger and CSVLogger keep it beside the
module's hyperparameters and write both to ``hparams.yaml``, as under Lightning (issue #47)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import yaml
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from tests.integration.compat.frameworks import framework, lightning_installed

LOGGERS = ["CSVLogger", "TensorBoardLogger"]


def fit_sending_config(pl_name: str, root: Path, logger: str, hparams: bool = True) -> dict:
    """Fit one epoch through the framework's LightningCLI with ``logger``; what its log folder's
    hparams.yaml holds."""
    pl = framework(pl_name)
    cli = framework("trainkit.cli" if pl_name == "trainkit" else "lightning.pytorch.cli")

    class LoggerSaveConfigCallback(cli.SaveConfigCallback):
        def save_config(self, trainer, pl_module, stage) -> None:
            if isinstance(trainer.logger, pl.loggers.Logger):
                config = self.parser.dump(self.config, skip_none=False)
                trainer.logger.log_hyperparams({"config": config})

    class Tiny(pl.LightningModule):
        def __init__(self, hidden: int = 3) -> None:
            super().__init__()
            if hparams:
                self.save_hyperparameters()
            self.layer = nn.Linear(2, hidden)

        def training_step(self, batch, batch_idx):
            return self.layer(batch[0]).pow(2).mean()

        def train_dataloader(self):
            return DataLoader(TensorDataset(torch.randn(8, 2)), batch_size=4)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    run = cli.LightningCLI(
        Tiny,
        args=["fit", "--trainer.logger", logger, "--trainer.logger.save_dir", str(root)],
        save_config_callback=LoggerSaveConfigCallback,
        save_config_kwargs={"save_to_log_dir": False},
        seed_everything_default=0,
        trainer_defaults={
            "default_root_dir": str(root),
            "max_epochs": 1,
            "enable_progress_bar": False,
            "enable_model_summary": False,
            "enable_checkpointing": False,
        },
    )
    saved = yaml.safe_load((Path(run.trainer.log_dir) / "hparams.yaml").read_text())
    saved.pop("_instantiator", None)  # Lightning's CLI adds how it built the module
    config = yaml.safe_load(saved.pop("config"))
    return {"hparams": saved, "model": config["model"], "seed": config["seed_everything"]}


@pytest.mark.parametrize("logger", LOGGERS)
def test_the_config_sent_to_the_logger_is_in_hparams_yaml(tmp_path, logger):
    run = fit_sending_config("trainkit", tmp_path, logger)
    assert run == {"hparams": {"hidden": 3}, "model": {"hidden": 3}, "seed": 0}


def test_without_module_hyperparameters_the_config_alone(tmp_path):
    run = fit_sending_config("trainkit", tmp_path, "TensorBoardLogger", hparams=False)
    assert run["hparams"] == {} and run["model"] == {"hidden": 3}


@lightning_installed
@pytest.mark.lightning
@pytest.mark.parametrize("logger", LOGGERS)
def test_the_same_as_lightning(tmp_path, logger):
    theirs = fit_sending_config("lightning.pytorch", tmp_path / "l", logger)
    assert fit_sending_config("trainkit", tmp_path / "t", logger) == theirs
