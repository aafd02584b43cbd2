"""A dry run starts the run as configured, runs a few training and validation batches on every
rank, reports memory, parameters per rank, step time and an estimate of the whole run, and
writes nothing; what the real run would fail on after an epoch fails here, in one line, exit 2."""

from __future__ import annotations

import math
import re

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from trainkit import DataModule, TrainModule
from trainkit.callbacks import EarlyStopping, ModelCheckpoint
from trainkit.errors import MisconfigurationError
from trainkit.scaling import RunSummary
from trainkit.state import LoopLimits, StageInputs
from trainkit.trainer import dry_run
from trainkit.trainer.dry_run import RankReading


class Regressor(TrainModule):
    def __init__(self, val_features: int = 4) -> None:
        super().__init__()
        self.val_features = val_features
        self.layer = torch.nn.Linear(4, 1)
        self.batches = {"train": 0, "val": 0}

    def training_step(self, batch, batch_idx):
        self.batches["train"] += 1
        x, y = batch
        loss = torch.nn.functional.mse_loss(self.layer(x), y)
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch, batch_idx):
        self.batches["val"] += 1
        x, y = batch
        x = x[:, : self.val_features]  # a mistake when val_features is not 4
        self.log("val_loss", torch.nn.functional.mse_loss(self.layer(x), y))

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def loader(samples=64):
    x = torch.randn(samples, 4, generator=torch.Generator().manual_seed(0))
    return DataLoader(TensorDataset(x, x.sum(1, keepdim=True)), batch_size=8)


class Points(DataModule):
    """64 training and 32 validation points, batches of 8."""

    def train_dataloader(self):
        return loader()

    def val_dataloader(self):
        return loader(32)


def summary(steps_per_epoch, total_steps):
    return RunSummary(
        **dict.fromkeys(("strategy", "backend", "accelerator", "devices", "precision"), "-"),
        **dict.fromkeys(("seed", "lr_rule", "log_dir"), "-"),
        world_size=2,
        num_nodes=1,
        per_device_batch=8,
        accumulate=2,
        effective_batch=32,
        configured_lr=0.1,
        lr_factor=1.0,
        final_lr=0.1,
        samples_per_epoch=160,
        steps_per_epoch=steps_per_epoch,
        total_steps=total_steps,
    )


def dry(make_trainer, model, ckpt_path=None, **trainer):
    options = {"dry_run": True, "max_epochs": 10, "enable_progress_bar": True, **trainer}
    make_trainer(**options).fit(model, loader(), loader(32), ckpt_path=ckpt_path)


def test_a_few_batches_of_each_loop_run_and_nothing_is_written(make_trainer, tmp_path, capsys):
    model = Regressor()
    dry(make_trainer, model, enable_checkpointing=True, logger=True)
    assert model.batches == {"train": dry_run.BATCHES, "val": dry_run.BATCHES}
    assert not [p for p in tmp_path.rglob("*") if p.is_file()]  # no checkpoint, no log
    out = capsys.readouterr().out
    assert "optimizer steps per epoch  8" in out  # the startup table describes the real run
    assert "total optimizer steps      80" in out
    assert re.search(r"\n +0 +\d[\d,]* MiB RSS +5 +[\d.,]+ ms +[\d.,]+ ms\n", out), out
    assert "one epoch" in out and "the whole run" in out
    assert "(slowest rank, median step after the first)" in out
    assert "dry run: the real run would start (exit 0)" in out


def test_a_monitored_key_nobody_logs_fails_in_seconds_with_a_hint(make_trainer):
    checkpoint = ModelCheckpoint(monitor="val_los")
    with pytest.raises(MisconfigurationError) as failed:
        dry(make_trainer, Regressor(), callbacks=[checkpoint])
    message = str(failed.value)
    assert "ModelCheckpoint monitors 'val_los'" in message
    assert "did you mean 'val_loss'?" in message
    dry(make_trainer, Regressor(), callbacks=[EarlyStopping(monitor="val_loss")])  # logged: fine


def test_the_estimate_is_the_slowest_rank_times_the_real_run():
    limits = LoopLimits(max_epochs=3, max_steps=-1, accumulate_grad_batches=2)
    planned = summary(steps_per_epoch=5, total_steps=15)

    class State:
        given = StageInputs(val_loaders=[list(range(4))])  # 4 validation batches an epoch

    readings = [
        RankReading(0, 2**20, "RSS", 10, 0.2, 0.05),
        RankReading(1, 2**20, "RSS", 10, 0.3, 0.1),
    ]
    text = dry_run.report(planned, limits, State(), readings)  # type: ignore[arg-type]
    epoch = 0.3 * 5 * 2 + 0.1 * 4  # slowest step x batches + slowest val batch x val batches
    assert f"one epoch {epoch:.1f} s, the whole run {3 * epoch:.1f} s" in text
    endless = summary(steps_per_epoch=5, total_steps=math.inf)
    assert "no end set" in dry_run.report(endless, limits, State(), readings)  # type: ignore[arg-type]


def test_a_batch_time_is_the_median_after_the_warm_up_batch():
    assert dry_run.typical([2.0, 0.1, 0.3, 0.2]) == 0.2  # the first, 2 s, is the warm-up
    assert dry_run.typical([2.0]) == 2.0  # alone: all there is
    assert dry_run.typical([]) is None


def test_parameters_per_rank_count_the_local_shard():
    assert dry_run.local_numel(torch.nn.Parameter(torch.zeros(3, 4))) == 12

    class Partitioned(torch.nn.Parameter):
        pass

    sharded = Partitioned(torch.zeros(10))
    sharded.ds_tensor = torch.zeros(5)  # what DeepSpeed ZeRO-3 keeps on this rank
    assert dry_run.local_numel(sharded) == 5


def test_the_cli_flag_answers_exit_0_or_one_line_exit_2(run_main, autoencoder_config, tmp_path):
    ok = run_main("fit", "-c", autoencoder_config, "--dry_run")
    assert ok.returncode == 0, ok.stderr
    assert re.search(r"\n +0 +[\d,]+ MiB RSS", ok.stdout), ok.stdout
    assert not list(tmp_path.rglob("*.ckpt")) and not list(tmp_path.rglob("config.yaml"))
    broken = run_main(
        "fit",
        "-c",
        autoencoder_config,
        "--dry_run",
        "--model",
        "tests.unit.trainer.test_dry_run.Regressor",
        "--model.val_features",
        "3",
        "--data",
        "tests.unit.trainer.test_dry_run.Points",
    )
    assert broken.returncode == 2, broken.stderr
    (line,) = broken.stderr.strip().splitlines()
    assert line.startswith("trainkit: error: dry run: the real run would fail: RuntimeError: ")
    assert "(test_dry_run.py:" in line and "in validation_step)" in line


def test_a_resumed_dry_run_measures_batches_from_the_checkpoint_on(make_trainer, capsys):
    make_trainer(max_epochs=1, enable_checkpointing=True).fit(Regressor(), loader(), loader(32))
    model = Regressor()
    capsys.readouterr()
    dry(make_trainer, model, max_epochs=2, enable_checkpointing=True, ckpt_path="last")
    out = capsys.readouterr().out
    assert "resumes at                 epoch 1, step 8 of 16" in out  # the real run's numbers
    assert model.batches["train"] == dry_run.BATCHES  # measured from step 8 on
    assert "median step after the first" in out


def test_a_dry_run_of_a_finished_checkpoint_says_nothing_is_left(make_trainer, capsys):
    make_trainer(max_epochs=1, enable_checkpointing=True).fit(Regressor(), loader(), loader(32))
    model = Regressor()
    capsys.readouterr()
    dry(make_trainer, model, max_epochs=1, enable_checkpointing=True, ckpt_path="last")
    out = capsys.readouterr().out
    assert "epoch 1, step 8 of 8 (nothing left to train" in out and "-76" not in out
    assert "dry run: the checkpoint already took the run's 8 optimizer steps: nothing left" in out
    assert model.batches == {"train": 0, "val": 0}
