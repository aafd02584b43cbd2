"""``precision=None`` (``trainer.precision: null`` in YAML) is Lightning's default precision:
the Trainer and the CLI take it, under trainkit as under Lightning (issue #47)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import trainkit
from tests.integration.compat.frameworks import BOTH, framework, quiet_trainer
from trainkit.strategies.precision import normalize_precision


def module_class(pl):
    class Tiny(pl.LightningModule):
        def __init__(self, hidden: int = 3) -> None:
            super().__init__()
            self.layer = nn.Linear(2, hidden)

        def training_step(self, batch, batch_idx):
            (x,) = batch
            loss = self.layer(x).pow(2).mean()
            self.log("loss", loss)
            return loss

        def train_dataloader(self):
            return DataLoader(TensorDataset(torch.randn(8, 2)), batch_size=4)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    return Tiny


def test_none_is_the_default_precision():
    assert normalize_precision(None) == "32"
    assert trainkit.Trainer(precision=None, logger=False).precision == "32"


@BOTH
def test_a_trainer_given_precision_none_trains_at_the_default(pl_name, tmp_path):
    pl = framework(pl_name)
    torch.manual_seed(0)
    trainer = quiet_trainer(pl, tmp_path, precision=None, max_epochs=1, logger=False)
    trainer.fit(module_class(pl)())
    assert trainer.precision in ("32", "32-true") and trainer.global_step == 2
    assert torch.isfinite(trainer.callback_metrics["loss"])


@BOTH
@pytest.mark.parametrize("given", ["yaml", "argument"])
def test_the_cli_reads_precision_null(pl_name, given, tmp_path):
    pl = framework(pl_name)
    cli_module = framework(f"{pl_name}.cli" if pl_name != "trainkit" else "trainkit.cli")
    config = Path(tmp_path, "precision.yaml")
    config.write_text("trainer:\n  precision: null\n  max_epochs: 1\n")
    args = ["-c", str(config)] if given == "yaml" else ["--trainer.precision", "null"]
    cli = cli_module.LightningCLI(
        module_class(pl),
        args=args,
        run=False,
        trainer_defaults={
            "logger": False,
            "enable_checkpointing": False,
            "enable_progress_bar": False,
            "enable_model_summary": False,
            "default_root_dir": str(tmp_path / "run"),
            "max_epochs": 1,
        },
    )
    assert cli.config["trainer"]["precision"] is None
    cli.trainer.fit(cli.model)
    assert cli.trainer.precision in ("32", "32-true") and cli.trainer.global_step == 2
