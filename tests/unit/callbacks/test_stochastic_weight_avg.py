"""StochasticWeightAveraging: the module ends with the average of the weights it had at the
start of each SWA epoch, the learning rate anneals to swa_lrs, BatchNorm statistics are
recomputed, and a resumed fit ends where an uninterrupted one does."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from tests.helpers.models import Regression, regression_loader
from trainkit import Trainer
from trainkit.callbacks import Callback, StochasticWeightAveraging
from trainkit.errors import ConfigError


class Snapshots(Callback):
    """The module's parameters at each epoch start, and the learning rate at each epoch end."""

    def __init__(self) -> None:
        self.at_start: list[list[torch.Tensor]] = []
        self.lrs: list[float] = []

    def on_train_epoch_start(self, trainer, module):
        self.at_start.append([p.detach().clone() for p in module.parameters()])

    def on_train_epoch_end(self, trainer, module):
        self.lrs.append(trainer.optimizers[0].param_groups[0]["lr"])


class Scheduled(Regression):
    def __init__(self, lr: float = 0.02) -> None:
        torch.manual_seed(0)  # the same initial weights every time
        super().__init__(lr=lr)

    def configure_optimizers(self):
        optimizer = torch.optim.SGD(self.parameters(), lr=self.hparams.lr)
        return [optimizer], [torch.optim.lr_scheduler.StepLR(optimizer, 1, 0.5)]


def fit(root, *callbacks, model=None, max_epochs=5, ckpt_path=None):
    torch.manual_seed(0)
    trainer = Trainer(
        accelerator="cpu",
        max_epochs=max_epochs,
        default_root_dir=str(root),
        enable_progress_bar=False,
        enable_model_summary=False,
        logger=False,
        num_sanity_val_steps=0,
        callbacks=list(callbacks),
    )
    model = model or Regression(lr=0.02)
    trainer.fit(model, regression_loader(), ckpt_path=ckpt_path)
    return trainer, model


def test_final_weights_are_the_average_of_the_swa_epochs(tmp_path, capsys):
    snapshots = Snapshots()
    swa = StochasticWeightAveraging(swa_lrs=0.004, swa_epoch_start=3, annealing_epochs=1)
    _, model = fit(tmp_path, swa, snapshots, model=Scheduled(lr=0.02))
    averaged = [torch.stack(group).mean(0) for group in zip(*snapshots.at_start[2:5])]
    for param, expected in zip(model.parameters(), averaged):
        torch.testing.assert_close(param.detach(), expected)
    assert swa.n_averaged == 3
    # StepLR halves the rate in epochs 0-1; SWALR then anneals it to swa_lrs in one epoch
    assert snapshots.lrs == pytest.approx([0.02, 0.01, 0.005, 0.004, 0.004])
    assert "Swapping scheduler `StepLR` for `SWALR`" in capsys.readouterr().out


def test_a_fraction_starts_at_that_share_of_max_epochs(tmp_path):
    snapshots = Snapshots()
    _, model = fit(tmp_path, StochasticWeightAveraging(0.01, swa_epoch_start=0.6), snapshots)
    averaged = [torch.stack(group).mean(0) for group in zip(*snapshots.at_start[2:5])]
    for param, expected in zip(model.parameters(), averaged):  # int(0.6 * 5) = 3: epochs 2-4
        torch.testing.assert_close(param.detach(), expected)


def halfway(averaged, current, n_averaged):
    """An exponential average: half the old average, half the new weights."""
    return (averaged + current) / 2


def test_a_custom_average_function(tmp_path):
    snapshots = Snapshots()
    swa = StochasticWeightAveraging(0.01, swa_epoch_start=4, avg_fn=halfway, device=None)
    _, model = fit(tmp_path, swa, snapshots)
    for param, at_3, at_4 in zip(model.parameters(), *snapshots.at_start[3:5]):
        torch.testing.assert_close(param.detach(), (at_3 + at_4) / 2)


class WithBatchNorm(Regression):
    def __init__(self):
        super().__init__(lr=0.02)
        self.norm = nn.BatchNorm1d(4)

    def forward(self, x):
        return self.layer(self.norm(x))

    def training_step(self, batch, batch_idx):
        return F.mse_loss(self(batch[0]), batch[1])


def test_batchnorm_statistics_are_recomputed_for_the_averaged_weights(tmp_path):
    _, model = fit(
        tmp_path, StochasticWeightAveraging(0.01, swa_epoch_start=2), model=WithBatchNorm()
    )
    inputs = torch.cat([x for x, _ in regression_loader()])
    # the norm comes first, so its statistics are the training inputs' (update_bn's cumulative
    # average over the batches), not the running estimate training left behind
    torch.testing.assert_close(model.norm.running_mean, inputs.mean(0))
    batch_vars = torch.stack([x.var(0) for x, _ in regression_loader()])
    torch.testing.assert_close(model.norm.running_var, batch_vars.mean(0))
    assert model.norm.momentum == 0.1  # restored after the update


def test_a_resumed_swa_fit_ends_with_the_same_weights(tmp_path):
    def swa():
        return StochasticWeightAveraging(swa_lrs=0.004, swa_epoch_start=2, annealing_epochs=2)

    _, straight = fit(tmp_path / "a", swa(), model=Scheduled(lr=0.02))
    first, _ = fit(tmp_path / "b", swa(), model=Scheduled(lr=0.02), max_epochs=3)
    state = torch.load(first.checkpoint_callback.last_model_path, weights_only=True)
    assert state["callbacks"]["StochasticWeightAveraging"]["n_averaged"] == 2
    _, resumed = fit(
        tmp_path / "c",
        swa(),
        model=Scheduled(lr=0.02),
        ckpt_path=first.checkpoint_callback.last_model_path,
    )
    for key, value in straight.state_dict().items():
        torch.testing.assert_close(resumed.state_dict()[key], value, rtol=0, atol=0)


def test_bad_arguments_name_the_value():
    with pytest.raises(ConfigError, match=r"swa_lrs -0\.1; expected a positive float"):
        StochasticWeightAveraging(swa_lrs=-0.1)
    with pytest.raises(ConfigError, match="swa_epoch_start 0; expected an int >= 1"):
        StochasticWeightAveraging(swa_lrs=0.1, swa_epoch_start=0)
    with pytest.raises(ConfigError, match="annealing_strategy 'exp'; expected 'cos' or 'linear'"):
        StochasticWeightAveraging(swa_lrs=0.1, annealing_strategy="exp")
