"""Timer: stops training at the first step past its duration, counts the time a resumed
fit already trained, checks its arguments."""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
import torch

from tests.helpers.callback_fits import fit
from tests.helpers.models import Regression
from trainkit.callbacks import Callback, Timer
from trainkit.errors import ConfigError


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
