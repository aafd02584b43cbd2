"""ModelCheckpoint with Lightning's arguments, and OnExceptionCheckpoint, in real fits."""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import pytest
import torch

from tests.helpers.models import Regression, regression_loader
from trainkit import Trainer
from trainkit.callbacks import Callback, ModelCheckpoint, OnExceptionCheckpoint
from trainkit.checkpoint.files import CheckpointError, load_checkpoint
from trainkit.errors import ConfigError
from trainkit.loggers.base import Logger


def fit(tmp_path, *callbacks, model=None, max_epochs=3, val=True, ckpt_path=None, **options):
    trainer = Trainer(
        accelerator="cpu",
        max_epochs=max_epochs,
        default_root_dir=str(tmp_path),
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        callbacks=list(callbacks),
        **{"logger": False, **options},
    )
    model = model or Regression()
    val_loader = regression_loader(seed=1) if val else None
    trainer.fit(model, regression_loader(), val_loader, ckpt_path=ckpt_path)
    return trainer, model


def names(folder) -> list[str]:
    return sorted(p.name for p in Path(folder).iterdir())


def test_save_weights_only_checkpoints_hold_no_optimizer_state_and_cannot_resume(tmp_path):
    callback = ModelCheckpoint(dirpath=tmp_path / "ckpt", save_weights_only=True)
    _, model = fit(tmp_path, callback)
    checkpoint = load_checkpoint(callback.best_model_path)
    assert "optimizer_states" not in checkpoint and "lr_schedulers" not in checkpoint
    assert "callbacks" not in checkpoint and "rng_states" not in checkpoint
    assert checkpoint["global_step"] == 24 and checkpoint["hyper_parameters"]["lr"] == 0.05
    restored = Regression.load_from_checkpoint(callback.last_model_path)
    assert torch.equal(restored.layer.weight, model.layer.weight)
    with pytest.raises(CheckpointError, match="holds no optimizer_states"):
        fit(tmp_path / "again", max_epochs=4, ckpt_path=callback.last_model_path)


def test_filenames_without_metric_names_and_a_version_counter(tmp_path):
    dirpath = tmp_path / "ckpt"
    template = "ep{epoch:02d}-{val_loss:.2f}-{not_logged}"
    plain = ModelCheckpoint(
        dirpath, template, monitor="val_loss", save_top_k=-1, auto_insert_metric_name=False
    )
    fit(tmp_path, plain, max_epochs=2)
    assert [n[:5] for n in names(dirpath)] == ["ep00-", "ep01-", "last."]
    assert names(dirpath)[0].endswith("-0.ckpt")  # a name that was not logged reads as 0
    named = ModelCheckpoint(dirpath, "best", save_last=False)  # the same name each epoch
    fit(tmp_path, named, max_epochs=2)
    assert named.best_model_path.endswith("best-v1.ckpt")  # best.ckpt existed: a new version
    assert "best-v1.ckpt" in names(dirpath) and "best.ckpt" not in names(dirpath)
    overwrite = ModelCheckpoint(
        tmp_path / "o", "best", save_last=False, enable_version_counter=False
    )
    fit(tmp_path, overwrite, max_epochs=2)
    assert names(tmp_path / "o") == ["best.ckpt"]


def test_no_trigger_means_every_epoch_and_a_step_trigger_saves_only_steps(tmp_path):
    every_epoch = ModelCheckpoint(tmp_path / "e", save_top_k=-1, every_n_train_steps=None)
    fit(tmp_path, every_epoch)
    assert names(tmp_path / "e") == [
        "epoch=0-step=8.ckpt", "epoch=1-step=16.ckpt", "epoch=2-step=24.ckpt", "last.ckpt",
    ]  # fmt: skip
    steps = ModelCheckpoint(tmp_path / "s", save_top_k=-1, every_n_train_steps=5)
    fit(tmp_path, steps)
    assert names(tmp_path / "s") == [
        "epoch=0-step=5.ckpt", "epoch=1-step=10.ckpt", "epoch=1-step=15.ckpt",
        "epoch=2-step=20.ckpt", "last.ckpt",
    ]  # fmt: skip
    # last.ckpt is the completed final epoch, so --ckpt_path last resumes exactly
    assert load_checkpoint(steps.last_model_path)["global_step"] == 24


def test_at_most_one_trigger_and_top_k_needs_a_monitor():
    with pytest.raises(ConfigError, match=r"every_n_train_steps=3, every_n_epochs=2.*one of them"):
        ModelCheckpoint(every_n_train_steps=3, every_n_epochs=2)
    with pytest.raises(ConfigError, match="save_top_k 3; expected -1, 0 or 1 without a monitor"):
        ModelCheckpoint(save_top_k=3)


def test_a_zero_time_interval_saves_after_every_step(tmp_path):
    callback = ModelCheckpoint(tmp_path / "t", save_top_k=-1, train_time_interval=timedelta(0))
    fit(tmp_path, callback, max_epochs=1)
    assert names(tmp_path / "t") == [f"epoch=0-step={s}.ckpt" for s in range(1, 9)] + ["last.ckpt"]


def test_save_on_validation_end_when_validation_runs_twice_an_epoch(tmp_path):
    callback = ModelCheckpoint(tmp_path / "v", monitor="val_loss", save_top_k=-1)
    fit(tmp_path, callback, max_epochs=2, val_check_interval=0.5)
    assert [n for n in names(tmp_path / "v") if n != "last.ckpt"] == [
        f"epoch={e}-step={s}.ckpt" for e, s in ((0, 4), (0, 8), (1, 12), (1, 16))
    ]
    explicit = ModelCheckpoint(tmp_path / "x", save_top_k=-1, save_on_train_epoch_end=True)
    fit(tmp_path, explicit, max_epochs=2, val_check_interval=0.5)
    assert names(tmp_path / "x") == ["epoch=0-step=8.ckpt", "epoch=1-step=16.ckpt", "last.ckpt"]


def test_verbose_prints_lightnings_lines(tmp_path, capsys):
    callback = ModelCheckpoint(tmp_path / "c", monitor="val_loss", verbose=True, mode="max")
    fit(tmp_path, callback, max_epochs=2)
    out = capsys.readouterr().out
    assert "Epoch 0, global step 8: 'val_loss' reached " in out and "as top 1" in out
    assert "Epoch 1, global step 16: 'val_loss' was not in top 1" in out  # the loss fell


def test_loggers_hear_after_save_checkpoint_for_each_save(tmp_path):
    class Recorder(Logger):
        heard: list[str] = []

        def log_metrics(self, metrics, step):
            pass

        def after_save_checkpoint(self, checkpoint_callback):
            self.heard.append(Path(checkpoint_callback.best_model_path).name)

    recorder = Recorder(str(tmp_path / "logs"))
    callback = ModelCheckpoint(tmp_path / "c", monitor="val_loss", save_last=False)
    fit(tmp_path, callback, max_epochs=2, logger=recorder)
    assert recorder.heard == ["epoch=0-step=8.ckpt", "epoch=1-step=16.ckpt"]


def test_save_last_link_points_at_the_newest_checkpoint(tmp_path):
    callback = ModelCheckpoint(tmp_path / "c", save_last="link")
    fit(tmp_path, callback, max_epochs=2)
    last = Path(callback.last_model_path)
    assert last.is_symlink() and os.readlink(last) == "epoch=1-step=16.ckpt"
    assert load_checkpoint(last)["global_step"] == 16


def test_two_checkpoint_callbacks_keep_their_own_state_across_a_resume(tmp_path):
    by_loss = ModelCheckpoint(tmp_path / "a", monitor="val_loss", save_top_k=2)
    every = ModelCheckpoint(tmp_path / "b", every_n_train_steps=4, save_last=False)
    fit(tmp_path, by_loss, every, max_epochs=2)
    state = load_checkpoint(by_loss.last_model_path)["callbacks"]
    assert len(state) == 2 and by_loss.state_key != every.state_key
    again = ModelCheckpoint(tmp_path / "a", monitor="val_loss", save_top_k=2)
    fit(tmp_path, again, max_epochs=3, ckpt_path=by_loss.last_model_path)
    # it knew epoch 0's checkpoint from the resumed state, so it dropped it for epoch 2's
    assert names(tmp_path / "a") == ["epoch=1-step=16.ckpt", "epoch=2-step=24.ckpt", "last.ckpt"]
    assert again.best_model_score == min(again.best_k_models.values())


class FailsAt(Regression):
    """Raises in training_step at one epoch and batch."""

    def __init__(self, epoch: int = 1, batch: int = 3) -> None:
        super().__init__()
        self.fail_at = (epoch, batch)

    def training_step(self, batch, batch_idx):
        if (self.current_epoch, batch_idx) == self.fail_at:
            raise ValueError("boom on purpose")
        return super().training_step(batch, batch_idx)


def test_on_exception_checkpoint_saves_a_resumable_checkpoint(tmp_path):
    callback = OnExceptionCheckpoint(tmp_path / "crash")
    with pytest.raises(ValueError, match="boom on purpose"):
        fit(tmp_path, callback, model=(failing := FailsAt()), max_epochs=3)
    assert callback.ckpt_path == str(tmp_path / "crash" / "on_exception.ckpt")
    checkpoint = load_checkpoint(callback.ckpt_path)
    assert checkpoint["loops"]["epoch"] == 1 and checkpoint["loops"]["batches_in_epoch"] == 3
    assert torch.equal(checkpoint["state_dict"]["layer.weight"], failing.layer.weight)
    started_at = []

    class StartProbe(Callback):
        def on_train_start(self, trainer, module):
            started_at.append(trainer.global_step)

    trainer, _ = fit(tmp_path, StartProbe(), max_epochs=3, ckpt_path=callback.ckpt_path)
    assert started_at == [11] and trainer.global_step == 24  # 8 + 3 steps done before the crash


def test_model_checkpoint_save_on_exception(tmp_path):
    callback = ModelCheckpoint(tmp_path / "c", save_on_exception=True, save_last=False)
    with pytest.raises(ValueError, match="boom"):
        fit(tmp_path, callback, model=FailsAt(epoch=1, batch=2), max_epochs=3)
    assert names(tmp_path / "c") == ["epoch=0-step=8.ckpt", "epoch=1-step=10.ckpt"]


class ScoredByEpoch(Regression):
    """Logs a validation score set per epoch: 0.30, 0.391, then worse after the resume."""

    SCORES = (0.30, 0.391, 0.354, 0.36)

    def validation_step(self, batch, batch_idx):
        self.log("val_score", self.SCORES[self.current_epoch])


def test_a_resumed_run_keeps_the_earlier_best_until_a_better_one(tmp_path, capsys):
    """The resumed run writes into a new version folder; its best stays the earlier run's
    0.391 (was: forgotten, 0.354 became the best without a word), said once."""
    first_callback = ModelCheckpoint(monitor="val_score", mode="max")
    fit(tmp_path, first_callback, model=ScoredByEpoch(), max_epochs=2, logger=True)
    earlier = first_callback.best_model_path
    assert "version_0" in earlier and float(first_callback.best_model_score) == pytest.approx(0.391)
    capsys.readouterr()
    resumed = ModelCheckpoint(monitor="val_score", mode="max")
    fit(tmp_path, resumed, model=ScoredByEpoch(), max_epochs=4, logger=True, ckpt_path=earlier)
    assert "version_1" in resumed.dirpath
    assert resumed.best_model_path == earlier and Path(earlier).exists()
    assert float(resumed.best_model_score) == pytest.approx(0.391)
    assert all("version_1" in path for path in resumed.best_k_models)  # only its own folder
    said = [line for line in capsys.readouterr().out.splitlines() if "resumed run's best" in line]
    assert said == [
        f"trainkit: ModelCheckpoint: the resumed run's best {earlier} (val_score=0.391) stays the "
        f"best until a better one; new checkpoints go to {resumed.dirpath}"
    ]


class ManualRegression(Regression):
    """The same regression, stepped by hand."""

    def __init__(self) -> None:
        super().__init__()
        self.automatic_optimization = False

    def training_step(self, batch, batch_idx):
        optimizer = self.optimizers()
        x, y = batch
        loss = torch.nn.functional.mse_loss(self(x), y)
        optimizer.zero_grad()
        self.manual_backward(loss)
        optimizer.step()
        return loss


def test_saving_every_n_steps_under_manual_optimization_says_which_weights_it_holds(tmp_path):
    """As Lightning warns: the file holds the weights after the step's optimizer.step()."""
    every_step = ModelCheckpoint(dirpath=str(tmp_path / "ckpts"), every_n_train_steps=1)
    with pytest.warns(UserWarning, match=r"after the step's optimizer\.step\(\)"):
        _, model = fit(tmp_path, every_step, model=ManualRegression(), max_epochs=1)
    saved = load_checkpoint(every_step.best_model_path)["state_dict"]
    assert torch.equal(saved["layer.weight"], model.layer.weight.detach())


class EpochLossRegression(Regression):
    """Logs its training loss per epoch only: a monitor that exists after the first epoch."""

    def training_step(self, batch, batch_idx):
        loss = super().training_step(batch, batch_idx)
        self.log("loss_epoch", loss, on_step=False, on_epoch=True)
        return loss


def test_each_optimizer_step_is_saved_once_though_the_next_epoch_starts_at_that_step(tmp_path):
    """As Lightning: with gradient accumulation an epoch's first batch ends at the step the last
    epoch saved; the epoch-end last.ckpt does not make that step due again."""
    every_step = ModelCheckpoint(
        tmp_path / "c", monitor="loss_epoch", save_top_k=-1, every_n_train_steps=1
    )
    fit(tmp_path, every_step, model=EpochLossRegression(), val=False, accumulate_grad_batches=2)
    steps = [
        load_checkpoint(tmp_path / "c" / name)["global_step"] for name in names(tmp_path / "c")
    ]
    top_k = steps[:-1]  # last.ckpt aside
    assert sorted(top_k) == sorted(set(top_k)) == list(range(4, 13))


class LateMetricRegression(Regression):
    """Logs one more metric from the second epoch on."""

    def training_step(self, batch, batch_idx):
        loss = super().training_step(batch, batch_idx)
        if self.current_epoch >= 1:
            self.log("late", loss)
        return loss


def test_a_missing_monitor_is_said_again_when_the_logged_metrics_change(tmp_path):
    """As Lightning's warning cache: each different text once (epoch 0's, then epochs 1-2's)."""
    missing = ModelCheckpoint(tmp_path / "c", monitor="val_acc")
    with pytest.warns(UserWarning) as said:
        fit(tmp_path, missing, model=LateMetricRegression(), val=False, max_epochs=3)
    texts = [str(w.message) for w in said if "could not find the monitored key" in str(w.message)]
    assert len(texts) == len(set(texts)) == 2
    assert "'late'" not in texts[0] and "'late'" in texts[1]
