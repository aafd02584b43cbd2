"""A NaN or infinite loss is reported at the step it appears (rank, epoch, batch, step); by
default the fit stops there, before that batch changes the weights; ``nonfinite_loss: warn``
says it once and trains on; and weights with NaN never replace a saved checkpoint."""

from __future__ import annotations

import math

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from trainkit import ModelCheckpoint, TrainModule
from trainkit.checkpoint.files import load_checkpoint
from trainkit.errors import ConfigError, NonFiniteLossError


class GoesNaN(TrainModule):
    """A regression whose loss becomes NaN from global step ``from_step`` on."""

    def __init__(self, from_step: int = 5) -> None:
        super().__init__()
        self.from_step = from_step
        self.layer = torch.nn.Linear(4, 1)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.layer(x), y)
        if self.trainer.global_step >= self.from_step:
            loss = loss * math.nan
        self.log("train_loss", loss)
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.05)


def loader():
    x = torch.randn(32, 4, generator=torch.Generator().manual_seed(0))
    return DataLoader(TensorDataset(x, x.sum(1, keepdim=True)), batch_size=8)  # 4 batches


def finite(path) -> bool:
    weights = load_checkpoint(str(path))["state_dict"].values()
    return all(bool(torch.isfinite(w).all()) for w in weights)


def test_by_default_the_fit_stops_at_the_step_before_the_weights_change(make_trainer, tmp_path):
    model = GoesNaN(from_step=5)
    trainer = make_trainer(max_epochs=4, enable_checkpointing=True)
    with pytest.raises(NonFiniteLossError) as stopped:
        trainer.fit(model, loader())
    message = str(stopped.value)
    assert (
        "rank 0: the loss returned by training_step is nan at epoch 1, batch 1 (global step 5)"
        in message
    )
    assert "nonfinite_loss: warn" in message and "\n" not in message
    assert all(bool(torch.isfinite(p).all()) for p in model.parameters())
    assert trainer.global_step == 5  # the NaN batch took no step
    (last,) = tmp_path.glob("**/last.ckpt")
    assert finite(last)


def test_warn_says_it_once_trains_on_and_keeps_the_finite_checkpoints(
    make_trainer, tmp_path, capsys
):
    checkpoint = ModelCheckpoint(dirpath=tmp_path / "ckpts", save_last=True, save_top_k=-1)
    trainer = make_trainer(max_epochs=4, nonfinite_loss="warn", callbacks=[checkpoint])
    trainer.fit(GoesNaN(from_step=5), loader())
    err = capsys.readouterr()
    assert err.err.count("the loss returned by training_step is nan") == 1
    assert "training goes on (nonfinite_loss: warn)" in err.err
    assert trainer.global_step == 16  # trained on
    saved = sorted(p.name for p in (tmp_path / "ckpts").iterdir())
    assert saved == ["epoch=0-step=4.ckpt", "last.ckpt"]  # nothing from the NaN weights
    assert finite(tmp_path / "ckpts" / "last.ckpt")
    assert load_checkpoint(str(tmp_path / "ckpts" / "last.ckpt"))["global_step"] == 4
    assert "the weights hold NaN or infinity at epoch 1" in err.out


def test_ignore_checks_nothing(make_trainer):
    trainer = make_trainer(max_epochs=2, nonfinite_loss="ignore")
    trainer.fit(GoesNaN(from_step=2), loader())
    assert trainer.global_step == 8


def test_a_bad_choice_is_one_line_naming_the_choices(make_trainer):
    with pytest.raises(
        ConfigError, match=r"trainer\.nonfinite_loss 'halt'; expected 'stop' or 'warn' or 'ignore'"
    ):
        make_trainer(nonfinite_loss="halt")
