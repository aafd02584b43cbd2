"""The config a trainkit CLI run saves (``log_dir/config.yaml``) loads under Lightning's CLI and
back under trainkit's to the same settings (issue #47): trainkit's own keys are left out while
they hold their defaults, its loggers and callbacks named by class name, a logger's save_dir
written out."""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
import torch
import yaml
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import trainkit
from tests.integration.compat.frameworks import framework, lightning, lightning_installed
from trainkit.cli.lightning_config import TRAINER_ONLY, TRAINKIT_ONLY

TRAINER = {
    "max_epochs": 1,
    "enable_progress_bar": False,
    "enable_model_summary": False,
}


def module_class(pl_name: str) -> type:
    pl = framework(pl_name)

    class Tiny(pl.LightningModule):
        def __init__(self, hidden: int = 3) -> None:
            super().__init__()
            self.layer = nn.Linear(2, hidden)

        def training_step(self, batch, batch_idx):
            loss = self.layer(batch[0]).pow(2).mean()
            self.log("loss", loss)
            return loss

        def train_dataloader(self):
            return DataLoader(TensorDataset(torch.randn(8, 2)), batch_size=4)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    return Tiny


def fit_and_save(root: Path, *extra: str) -> tuple[Path, dict]:
    """A trainkit CLI fit with a CSVLogger (save_dir left to the Trainer) and two callbacks;
    the saved file and the config the checkpoints record."""
    from trainkit.cli import LightningCLI

    args = [
        "fit",
        "--model.hidden=5",
        f"--trainer.default_root_dir={root}",
        "--trainer.logger=CSVLogger",
        "--trainer.callbacks+=ModelCheckpoint",
        "--trainer.callbacks.monitor=loss",
        "--trainer.callbacks+=LearningRateMonitor",
        *extra,
    ]
    cli = LightningCLI(module_class("trainkit"), args=args, trainer_defaults=TRAINER)
    recorded = yaml.safe_load(cli.trainer.cli_config)
    return Path(cli.trainer.log_dir) / "config.yaml", recorded


def print_config(cli_module: str, model: type, saved: Path, capsys) -> dict:
    """What a CLI of ``cli_module`` reads from ``saved`` (its ``fit --print_config``)."""
    cli = framework(cli_module)
    with pytest.raises(SystemExit) as exited:
        cli.LightningCLI(model, args=["fit", "-c", str(saved), "--print_config"])
    assert exited.value.code in (0, None)
    return yaml.safe_load(capsys.readouterr().out)


def test_trainkit_only_keys_at_their_defaults_are_left_out(tmp_path):
    saved, _ = fit_and_save(tmp_path)
    text = yaml.safe_load(saved.read_text())
    for key in TRAINKIT_ONLY:
        section, _, name = key.rpartition(".")
        assert name not in (text[section] if section else text), key
    assert text["trainer"]["logger"]["class_path"] == "CSVLogger"
    assert text["trainer"]["logger"]["init_args"]["save_dir"] == str(tmp_path)
    names = [callback["class_path"] for callback in text["trainer"]["callbacks"]]
    assert names == ["ModelCheckpoint", "LearningRateMonitor"]


def test_a_trainkit_only_key_that_was_set_is_kept(tmp_path):
    saved, _ = fit_and_save(tmp_path, "--trainer.nonfinite_loss=warn")
    assert yaml.safe_load(saved.read_text())["trainer"]["nonfinite_loss"] == "warn"


def test_trainkit_reads_the_saved_file_back_to_the_config_the_run_recorded(tmp_path, capsys):
    saved, recorded = fit_and_save(tmp_path)
    capsys.readouterr()
    again = print_config("trainkit.cli", module_class("trainkit"), saved, capsys)
    assert again == {key: value for key, value in recorded.items() if key != "config"}


@lightning_installed
@pytest.mark.lightning
def test_the_trainkit_only_keys_are_the_trainer_arguments_lightning_has_not():
    ours = set(inspect.signature(trainkit.Trainer.__init__).parameters)
    theirs = set(inspect.signature(lightning().Trainer.__init__).parameters)
    assert set(TRAINER_ONLY) == ours - theirs


@lightning_installed
@pytest.mark.lightning
def test_lightnings_cli_reads_the_saved_file(tmp_path, capsys):
    saved, _ = fit_and_save(tmp_path)
    capsys.readouterr()
    theirs = print_config("lightning.pytorch.cli", module_class("lightning.pytorch"), saved, capsys)
    assert theirs["model"] == {"hidden": 5} and theirs["trainer"]["max_epochs"] == 1
    logger = theirs["trainer"]["logger"]
    assert logger["class_path"] == "lightning.pytorch.loggers.CSVLogger"
    assert logger["init_args"]["save_dir"] == str(tmp_path)
    callbacks = theirs["trainer"]["callbacks"]
    assert [c["class_path"].rpartition(".")[2] for c in callbacks] == [
        "ModelCheckpoint",
        "LearningRateMonitor",
    ]
    assert callbacks[0]["class_path"].startswith("lightning.pytorch.callbacks")
    assert callbacks[0]["init_args"]["monitor"] == "loss"
