"""Resuming shows what changed since the checkpoint; changes that cannot resume correctly are
refused in one line naming the key: the optimizer class and the precision (unless the user
accepts them by name), and model arguments that build another architecture (the weights do not
fit); the others (a model's learning rate, max_epochs, logging, callbacks) are shown and go on."""

from __future__ import annotations

import re

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from trainkit import TrainModule
from trainkit.checkpoint import resume_changes
from trainkit.checkpoint.files import CheckpointError
from trainkit.checkpoint.resume_changes import ALLOW_ENV, Change, changes, settings
from trainkit.strategies import SingleDeviceStrategy


class Regressor(TrainModule):
    optimizer_class: type[torch.optim.Optimizer] = torch.optim.SGD

    def __init__(self, hidden: int = 8, lr: float = 0.05) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = torch.nn.Sequential(
            torch.nn.Linear(4, hidden), torch.nn.ReLU(), torch.nn.Linear(hidden, 1)
        )

    def training_step(self, batch, batch_idx):
        x, y = batch
        return torch.nn.functional.mse_loss(self.net(x), y)

    def configure_optimizers(self):
        return self.optimizer_class(self.parameters(), lr=self.hparams.lr)


class AdamRegressor(Regressor):
    optimizer_class = torch.optim.Adam


def loader():
    x = torch.randn(32, 4, generator=torch.Generator().manual_seed(0))
    return DataLoader(TensorDataset(x, x.sum(1, keepdim=True)), batch_size=8)


@pytest.fixture
def saved(make_trainer, tmp_path):
    """A checkpoint of one epoch of Regressor(hidden=8, lr=0.05) in full precision."""
    trainer = make_trainer(max_epochs=1, enable_checkpointing=True)
    trainer.fit(Regressor(), loader())
    (path,) = tmp_path.glob("**/last.ckpt")
    return str(path)


def resume(make_trainer, path, model=None, **trainer):
    options = {"max_epochs": 2, **trainer}
    fitted = make_trainer(**options)
    fitted.fit(model or Regressor(), loader(), ckpt_path=path)
    return fitted


def test_harmless_changes_are_shown_and_the_run_goes_on(make_trainer, saved, capsys):
    fitted = resume(make_trainer, saved, max_epochs=3)
    assert fitted.current_epoch == 3  # resumed at epoch 1, trained to 3
    assert "resuming a run whose settings changed" not in capsys.readouterr().out  # hparams same


def test_a_changed_model_argument_is_shown_and_the_run_goes_on(make_trainer, saved, capsys):
    fitted = resume(make_trainer, saved, Regressor(lr=0.01))
    assert fitted.current_epoch == 2
    assert re.search(r"\n  model\.lr +0\.05 -> 0\.01\n", capsys.readouterr().out)  # the table


def test_an_architecture_change_is_refused_naming_the_argument(make_trainer, saved):
    with pytest.raises(CheckpointError) as refused:
        resume(make_trainer, saved, Regressor(hidden=16))
    message = str(refused.value)
    assert "does not fit" in message and "\n" not in message
    assert message.endswith("; changed since it was saved: model.hidden 8 -> 16")


def test_an_accepted_change_resumes(make_trainer, saved, monkeypatch):
    monkeypatch.setenv(ALLOW_ENV, "precision")
    fitted = resume(make_trainer, saved, precision="bf16-mixed")
    assert fitted.current_epoch == 2


def test_another_optimizer_class_is_refused(make_trainer, saved):
    with pytest.raises(CheckpointError, match=r"optimizers changed from torch\.optim\.sgd\.SGD"):
        resume(make_trainer, saved, AdamRegressor())


class WrappingStrategy(SingleDeviceStrategy):
    """Wraps each optimizer in a subclass made at setup, as horovod's DistributedOptimizer."""

    def setup_optimizers(self, wrapped, optimizers, schedulers):
        wrapped, optimizers = super().setup_optimizers(wrapped, optimizers, schedulers)
        for optimizer in optimizers:
            optimizer.__class__ = type("SGD", (type(optimizer),), {})
        return wrapped, optimizers


def test_a_strategys_wrapper_is_not_another_optimizer_class(make_trainer, saved, tmp_path):
    """A run that wraps the configured SGD resumes a plain SGD checkpoint, and records SGD."""
    fitted = resume(make_trainer, saved, strategy=WrappingStrategy())
    assert fitted.current_epoch == 2
    assert type(fitted.optimizers[0]).__module__ == __name__  # the wrapper was used
    fitted.save_checkpoint(tmp_path / "wrapped.ckpt")
    recorded = torch.load(tmp_path / "wrapped.ckpt", weights_only=False)["optimizer_classes"]
    assert recorded == ["torch.optim.sgd.SGD"]


def test_another_precision_is_refused_unless_accepted(make_trainer, saved, monkeypatch):
    with pytest.raises(CheckpointError) as refused:
        resume(make_trainer, saved, precision="bf16-mixed")
    message = str(refused.value)
    assert "precision changed from 32 to bf16-mixed" in message
    assert f"--allow_resume_changes precision (or {ALLOW_ENV}=precision)" in message
    monkeypatch.setenv(ALLOW_ENV, "all")
    assert resume(make_trainer, saved, precision="bf16-mixed").current_epoch == 2


def test_settings_flatten_a_cli_config_and_leave_out_how_the_run_was_started():
    config = "model:\n  init_args:\n    hidden: 8\nckpt_path: last\ntrainer:\n  callbacks: []\n"
    found = settings({"config": config, "precision": "32", "optimizer_classes": ["a.B"]})
    assert found.from_config
    assert found.values == {
        "model.init_args.hidden": "8",
        "trainer.callbacks": "[]",
        "precision": "32",
        "optimizers": "a.B",
    }


def test_what_an_older_checkpoint_did_not_record_is_not_a_change():
    saved = {"model.hidden": "8", "precision": "32"}
    now = {"model.hidden": "8", "precision": "32", "optimizers": "torch.optim.sgd.SGD"}
    assert changes(saved, now) == []
    assert changes({"trainer.logger": "true"}, {}) == [Change("trainer.logger", "true", None)]


def test_the_breaking_kinds():
    assert Change("optimizers", "a.SGD", "a.Adam").breaking
    assert Change("precision", "32", "16-mixed").breaking
    shown = ("model.init_args.lr", "trainer.max_epochs", "trainer.callbacks", "world_size")
    for harmless in shown:
        assert Change(harmless, "1", "2").breaking is None
    assert Change("model.init_args.dropout", None, "0.1").breaking is None  # a new argument


def test_the_table_keeps_long_values_short():
    text = resume_changes.table([Change("trainer.callbacks", "[]", "x" * 200)])
    assert text.splitlines()[1].endswith("[] -> " + "x" * 45 + "...")


def test_the_cli_refuses_before_any_rank_starts_and_accepts_by_flag(run_main, autoencoder_config):
    common = ["-c", autoencoder_config, "--trainer.max_epochs", "1"]
    common += ["--data.num_samples", "256", "--trainer.enable_progress_bar", "false"]
    assert run_main("fit", *common).returncode == 0
    again = [*common, "--ckpt_path", "last", "--trainer.max_epochs", "2"]
    refused = run_main("fit", *again, "--trainer.devices", "2", "--trainer.precision", "bf16-mixed")
    assert refused.returncode == 2
    assert refused.stderr.count("\n") == 1, refused.stderr  # one line, from no rank
    assert "precision changed from 32 to bf16-mixed" in refused.stderr
    assert re.search(r"\n  trainer\.max_epochs +1 -> 2\n", refused.stdout)
    unfit = run_main("fit", *again, "--model.hidden", "32")
    assert unfit.returncode == 2 and unfit.stderr.count("\n") == 1, unfit.stderr
    assert "changed since it was saved: model.init_args.hidden 64 -> 32" in unfit.stderr
    accepted = run_main(
        "fit", *again, "--model.lr", "0.001", "--trainer.precision", "bf16-mixed",
        "--allow_resume_changes", "precision",
    )  # fmt: skip
    assert accepted.returncode == 0, accepted.stderr
    assert "resuming at epoch 1" in accepted.stdout
    assert re.search(r"\n  model\.init_args\.lr +0\.01 -> 0\.001\n", accepted.stdout)
