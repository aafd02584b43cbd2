"""``LightningCLI`` with Lightning's options, hooks and parser helpers, driven in-process the way
a user's script drives it (``args=`` instead of sys.argv); tiny models, one epoch each."""

from __future__ import annotations

import inspect
import re

import pytest
import torch
import torch.nn.functional as F
import yaml
from torch.utils.data import DataLoader, TensorDataset

import trainkit as pl
from tests.helpers.command_env import REPO
from trainkit.callbacks import Callback, EarlyStopping
from trainkit.cli import (
    LightningArgumentParser,
    LightningCLI,
    OptimizerCallable,
    ReduceLROnPlateau,
    SaveConfigCallback,
    TrainkitCLI,
)
from trainkit.errors import ConfigError


class TinyData(pl.LightningDataModule):
    def __init__(
        self, num_samples: int = 32, features: int = 3, classes: int = 2, batch_size: int = 8
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.num_classes = classes

    def setup(self, stage: str) -> None:
        generator = torch.Generator().manual_seed(0)
        x = torch.randn(self.hparams.num_samples, self.hparams.features, generator=generator)
        self.data = TensorDataset(x, torch.arange(self.hparams.num_samples) % self.num_classes)

    def train_dataloader(self) -> DataLoader:
        return DataLoader(self.data, batch_size=self.hparams.batch_size)

    def val_dataloader(self) -> DataLoader:
        return DataLoader(self.data, batch_size=self.hparams.batch_size)


class TinyModel(pl.LightningModule):
    def __init__(
        self,
        features: int = 3,
        num_classes: int = 2,
        optimizer: OptimizerCallable = torch.optim.SGD,
    ) -> None:
        super().__init__()
        self.save_hyperparameters(ignore=["optimizer"])
        self.optimizer = optimizer
        self.layer = torch.nn.Linear(features, num_classes)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.cross_entropy(self.layer(x), y)
        self.log("train_loss", loss, on_step=False, on_epoch=True)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val_loss", F.cross_entropy(self.layer(x), y))

    def configure_optimizers(self):
        return self.optimizer(self.parameters())


class EpochsSeen(Callback):
    """A callback with its own config section: remembers the epochs it saw start."""

    def __init__(self, label: str = "seen") -> None:
        self.label = label
        self.epochs: list[int] = []

    def on_train_epoch_start(self, trainer, pl_module) -> None:
        self.epochs.append(trainer.current_epoch)


class NoFitTrainer(pl.Trainer):
    """Lightning's docs trick for a CLI test: a Trainer whose fit does nothing."""

    def fit(self, *args, **kwargs) -> None:
        self.fit_called = True


def quiet(root) -> dict:
    return {
        "accelerator": "cpu",
        "devices": 1,
        "max_epochs": 1,
        "logger": False,
        "enable_progress_bar": False,
        "enable_model_summary": False,
        "enable_checkpointing": False,
        "default_root_dir": str(root),
    }


def test_run_false_builds_model_data_and_trainer_for_the_script_to_fit(tmp_path):
    cli = LightningCLI(
        TinyModel,
        TinyData,
        run=False,
        seed_everything_default=5,
        trainer_defaults=quiet(tmp_path),
        save_config_kwargs={"overwrite": True},
        args=["--model.features", "4", "--data.features", "4", "--optimizer", "Adam"],
    )
    assert cli.subcommand is None and cli.config["seed_everything"] == 5
    assert isinstance(cli.model, TinyModel) and isinstance(cli.datamodule, TinyData)
    assert cli.config_init["model"] is cli.model and cli.trainer.max_epochs == 1
    cli.trainer.fit(cli.model, datamodule=cli.datamodule)
    assert isinstance(cli.trainer.optimizers[0], torch.optim.Adam)  # the optimizer section
    saved = yaml.safe_load((tmp_path / "config.yaml").read_text())
    assert saved["seed_everything"] == 5 and saved["model"]["features"] == 4

    as_dict = LightningCLI(
        TinyModel, TinyData, run=False, trainer_defaults=quiet(tmp_path), args={"data": {}}
    )
    assert as_dict.config["model"]["features"] == 3  # args may be a dict, as in Lightning


def test_subclass_hooks_sections_and_links_in_lightnings_order(tmp_path):
    calls: list[str] = []

    class MyCLI(LightningCLI):
        def add_arguments_to_parser(self, parser) -> None:
            calls.append("add_arguments_to_parser")
            parser.add_lightning_class_args(EpochsSeen, "seen")
            parser.link_arguments("data.features", "model.features")
            parser.link_arguments("data.num_classes", "model.num_classes", apply_on="instantiate")
            parser.set_defaults({"seen.label": "from set_defaults"})

        def before_instantiate_classes(self) -> None:
            calls.append("before_instantiate_classes")

        def after_instantiate_classes(self) -> None:
            calls.append("after_instantiate_classes")

        def before_fit(self) -> None:
            calls.append("before_fit")

        def after_fit(self) -> None:
            calls.append("after_fit")

    persistent = EarlyStopping(monitor="val_loss", patience=5)
    cli = MyCLI(
        TinyModel,
        TinyData,
        trainer_defaults={**quiet(tmp_path), "callbacks": [persistent]},
        args=["fit", "--data.features", "5", "--data.classes", "3", "--trainer.max_epochs", "2"],
    )
    assert calls == [
        "add_arguments_to_parser",
        "before_instantiate_classes",
        "after_instantiate_classes",
        "before_fit",
        "after_fit",
    ]
    assert cli.config["fit"]["trainer"]["max_epochs"] == 2  # Lightning's config shape
    assert cli.model.layer.in_features == 5 and cli.model.layer.out_features == 3
    (seen,) = [c for c in cli.trainer.callbacks if isinstance(c, EpochsSeen)]
    assert seen.epochs == [0, 1] and seen.label == "from set_defaults"
    assert persistent in cli.trainer.callbacks


def test_a_misspelled_option_of_an_added_section_is_one_line_naming_the_fix(tmp_path, capsys):
    class MyCLI(LightningCLI):
        def add_arguments_to_parser(self, parser) -> None:
            parser.add_lightning_class_args(EpochsSeen, "seen")

    with pytest.raises(SystemExit) as exit_info:
        MyCLI(
            TinyModel, TinyData, trainer_defaults=quiet(tmp_path), args=["fit", "--seen.lable", "x"]
        )
    lines = capsys.readouterr().err.strip().splitlines()
    assert exit_info.value.code == 2 and len(lines) == 1, lines
    assert "'--seen.lable'" in lines[0] and "did you mean --seen.label?" in lines[0]


def test_config_is_saved_at_fit_start_and_an_old_one_is_not_overwritten(tmp_path, capsys):
    args = ["fit", "--trainer.max_epochs", "1"]
    LightningCLI(TinyModel, TinyData, trainer_defaults=quiet(tmp_path), args=args)
    config = tmp_path / "config.yaml"
    assert yaml.safe_load(config.read_text())["trainer"]["max_epochs"] == 1
    config.write_text("# kept\n")
    with pytest.raises(SystemExit) as exit_info:
        LightningCLI(TinyModel, TinyData, trainer_defaults=quiet(tmp_path), args=args)
    lines = capsys.readouterr().err.strip().splitlines()
    assert exit_info.value.code == 2 and len(lines) == 1, lines
    assert f"config file '{config}'" in lines[0] and "'overwrite': True" in lines[0]
    assert config.read_text() == "# kept\n"

    LightningCLI(
        TinyModel,
        TinyData,
        trainer_defaults=quiet(tmp_path),
        save_config_kwargs={"overwrite": True},
        args=args,
    )
    assert config.read_text() != "# kept\n"
    other = tmp_path / "none"
    LightningCLI(
        TinyModel, TinyData, trainer_defaults=quiet(other), save_config_callback=None, args=args
    )
    assert not (other / "config.yaml").exists()


def test_the_lr_scheduler_section_steps_on_the_monitor_it_names(tmp_path):
    """No validation runs, so only train_loss exists: the scheduler must follow it."""
    cli = LightningCLI(
        TinyModel,
        TinyData,
        trainer_defaults={**quiet(tmp_path), "limit_val_batches": 0, "max_epochs": 2},
        args=[
            "fit",
            "--optimizer=SGD",
            "--optimizer.lr=0.1",
            "--lr_scheduler=ReduceLROnPlateau",
            "--lr_scheduler.monitor=train_loss",
            "--lr_scheduler.patience=0",
            "--lr_scheduler.threshold=10",  # no epoch improves enough: each drops the rate
        ],
    )
    (config,) = cli.trainer.lr_scheduler_configs
    assert isinstance(config.scheduler, ReduceLROnPlateau) and config.monitor == "train_loss"
    assert cli.trainer.optimizers[0].param_groups[0]["lr"] == pytest.approx(0.1 * 0.1**2)


def test_the_trainkit_commands_lr_scheduler_section_names_its_monitor(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    args = [
        "fit",
        "-c",
        str(REPO / "configs" / "autoencoder.yaml"),
        "--data.init_args.num_samples=256",
        "--trainer.max_epochs=2",
        "--trainer.limit_val_batches=0",  # no val_loss: the old fixed monitor would fail
        "--trainer.logger=false",
        "--trainer.enable_progress_bar=false",
        "--optimizer=SGD",
        "--optimizer.lr=0.1",
        "--lr_scheduler=ReduceLROnPlateau",
        "--lr_scheduler.monitor=train_loss",
        "--lr_scheduler.factor=0.5",
        "--lr_scheduler.patience=0",
        "--lr_scheduler.threshold=10",
    ]
    for _ in range(2):  # the command replaces the config a run left in the same folder
        cli = TrainkitCLI(args=args)
    assert cli.trainer.lr_scheduler_configs[0].monitor == "train_loss"
    assert cli.trainer.optimizers[0].param_groups[0]["lr"] == pytest.approx(0.1 * 0.5**2)
    saved = yaml.safe_load((tmp_path / "runs" / "autoencoder" / "config.yaml").read_text())
    assert saved["lr_scheduler"]["init_args"]["monitor"] == "train_loss"


def test_whole_command_configs_nest_under_the_subcommand(tmp_path):
    defaults = tmp_path / "defaults.yaml"
    defaults.write_text("fit:\n  trainer:\n    max_epochs: 3\n")
    before = tmp_path / "before.yaml"
    before.write_text("fit:\n  model:\n    features: 6\n")
    cli = LightningCLI(
        TinyModel,
        TinyData,
        trainer_class=NoFitTrainer,
        trainer_defaults=quiet(tmp_path),
        parser_kwargs={"default_config_files": [str(defaults)]},
        auto_configure_optimizers=False,
        args=["-c", str(before), "fit"],
    )
    assert cli.trainer.fit_called and cli.trainer.max_epochs == 3
    assert cli.model.layer.in_features == 6
    assert "optimizer" not in vars(cli.config["fit"])  # the model's configure_optimizers stays


def test_the_parser_helpers_reject_what_they_cannot_add():
    parser = LightningArgumentParser()
    with pytest.raises(ConfigError, match="add_lightning_class_args\\('x'\\) <class 'int'>"):
        parser.add_lightning_class_args(int, "x")
    with pytest.raises(ConfigError, match="an Optimizer subclass"):
        parser.add_optimizer_args(torch.nn.Linear)
    parser.add_optimizer_args(torch.optim.Adam, link_to="model.optimizer_init")
    assert parser.optimizer_keys == {"optimizer": (torch.optim.Adam, "model.optimizer_init")}


def test_the_trainkit_command_is_a_lightning_cli():
    assert issubclass(TrainkitCLI, LightningCLI)


PAGE = (REPO / "docs" / "compat.md").read_text()


def documented_arguments(name: str) -> list[str]:
    (row,) = [line for line in PAGE.splitlines() if line.startswith(f"| `{name}` |")]
    (listed,) = re.findall(r"arguments: ([\w, ]+)", row)
    return [arg.strip() for arg in listed.split(",")]


@pytest.mark.parametrize("cls", [LightningCLI, SaveConfigCallback, ReduceLROnPlateau])
def test_the_cli_rows_of_the_compat_page_are_the_signatures(cls):
    signature = [p for p in inspect.signature(cls.__init__).parameters if p != "self"]
    assert documented_arguments(cls.__name__) == signature
