"""GradientAccumulationScheduler changes the fit loop's accumulation per epoch; Timer stops a
fit at its duration and counts the time of the run it resumes."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
import torch

from tests.helpers.models import Regression, regression_loader
from trainkit import Trainer
from trainkit.callbacks import Callback, GradientAccumulationScheduler, Timer
from trainkit.errors import ConfigError, MisconfigurationError


class StepsPerEpoch(Callback):
    """Optimizer steps each epoch took, and the accumulation the trainer reported."""

    def __init__(self) -> None:
        self.steps: list[int] = []
        self.accumulation: list[int] = []
        self._start = 0

    def on_train_epoch_start(self, trainer, module):
        self._start = trainer.global_step

    def on_train_epoch_end(self, trainer, module):
        self.steps.append(trainer.global_step - self._start)
        self.accumulation.append(trainer.accumulate_grad_batches)


def fit(*callbacks, model=None, max_epochs=4, ckpt_path=None, root=None, **options):
    trainer = Trainer(
        accelerator="cpu",
        max_epochs=max_epochs,
        enable_progress_bar=False,
        enable_model_summary=False,
        logger=False,
        enable_checkpointing=root is not None,
        default_root_dir=None if root is None else str(root),
        num_sanity_val_steps=0,
        callbacks=list(callbacks),
        **options,
    )
    model = model or Regression()
    trainer.fit(model, regression_loader(), ckpt_path=ckpt_path)
    return trainer


def test_accumulation_follows_the_schedule_epoch_by_epoch():
    probe = StepsPerEpoch()
    fit(GradientAccumulationScheduler({1: 2, 3: 4}), probe)
    assert probe.accumulation == [1, 2, 2, 4]
    assert probe.steps == [8, 4, 4, 2]  # 8 batches an epoch


def test_accumulated_steps_match_a_trainer_with_that_accumulation():
    """Epochs under the schedule's factor train like a Trainer with accumulate_grad_batches."""
    reference = Regression()
    scheduled = Regression()
    scheduled.load_state_dict(reference.state_dict())
    fit(GradientAccumulationScheduler({0: 4}), model=scheduled, max_epochs=2)
    fit(model=reference, max_epochs=2, accumulate_grad_batches=4)
    for key, value in reference.state_dict().items():
        assert torch.equal(scheduled.state_dict()[key], value), key


def test_scheduler_rejects_bad_schedules_and_a_trainer_accumulation():
    with pytest.raises(ConfigError, match=r"accumulation factors \[0\]; expected ints >= 1"):
        GradientAccumulationScheduler({2: 0})
    with pytest.raises(ConfigError, match=r"epochs \[-1\]; expected ints >= 0"):
        GradientAccumulationScheduler({-1: 2})
    with pytest.raises(ConfigError, match="remove accumulate_grad_batches from the Trainer"):
        fit(GradientAccumulationScheduler({1: 2}), accumulate_grad_batches=2)

    class Manual(Regression):
        def __init__(self):
            super().__init__()
            self.automatic_optimization = False

        def training_step(self, batch, batch_idx):
            return None

    with pytest.raises(MisconfigurationError, match="automatic optimization only"):
        fit(GradientAccumulationScheduler({1: 2}), model=Manual())


class Slow(Regression):
    """Each training step takes at least 20 ms (standing in for real work)."""

    def training_step(self, batch, batch_idx):
        time.sleep(0.02)
        return super().training_step(batch, batch_idx)


class ElapsedBeforeTimer(Callback):
    """Reads the timer at each batch end before the Timer checks it (it is listed first)."""

    def __init__(self, timer: Timer) -> None:
        self.timer = timer
        self.readings: list[float] = []

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
        self.readings.append(self.timer.time_elapsed())


def test_timer_stops_training_at_the_first_step_past_its_duration(capsys):
    timer = Timer(duration={"seconds": 0.3})
    probe = ElapsedBeforeTimer(timer)
    trainer = fit(probe, timer, model=Slow(), max_epochs=1000)
    assert trainer.current_epoch < 1000 and trainer.global_step == len(probe.readings)
    assert timer.time_elapsed() >= 0.3
    # it did not overshoot: before the step it stopped at, the duration had not passed
    assert all(reading < 0.3 for reading in probe.readings[:-1])
    assert timer.time_remaining() <= 0 and timer.start_time() < timer.end_time()
    assert "Time limit reached. Elapsed time is 0:00:00. Signaling Trainer to stop." in (
        capsys.readouterr().out
    )


def test_a_resumed_fit_counts_the_time_already_trained(tmp_path):
    first = fit(Timer(), model=Slow(), max_epochs=1, root=tmp_path / "a")  # no limit: it measures
    last = first.checkpoint_callback.last_model_path
    used = torch.load(last, weights_only=True)["callbacks"]["Timer"]["time_elapsed"]["train"]
    assert used >= 8 * 0.02
    allowed = timedelta(microseconds=int(used * 1e6))  # what was used, rounded down
    # a fresh Timer allowed that much time trains ...
    fresh = fit(Timer(duration=allowed), model=Slow(), max_epochs=2)
    assert fresh.global_step > 0
    # ... one resumed from the checkpoint finds the time spent and stops before any step
    resumed_timer = Timer(duration=allowed, interval="epoch")
    resumed = fit(resumed_timer, model=Slow(), max_epochs=2, root=tmp_path / "b", ckpt_path=last)
    assert resumed.global_step == 8 and resumed_timer.time_elapsed() >= used


def test_timer_arguments():
    assert (
        Timer("01:02:03:04")._duration
        == timedelta(days=1, hours=2, minutes=3, seconds=4).total_seconds()
    )
    with pytest.raises(ConfigError, match="Timer duration '1:2:3'; expected a string DD:HH:MM:SS"):
        Timer("1:2:3")
    with pytest.raises(ConfigError, match="Timer interval 'batch'; expected 'step' or 'epoch'"):
        Timer(interval="batch")
