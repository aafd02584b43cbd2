"""Timer: track the time each stage takes, and stop fitting once a duration is reached."""

from __future__ import annotations

import re
import time
from datetime import timedelta
from typing import TYPE_CHECKING, Any

from trainkit.callbacks.base import Callback
from trainkit.distributed.comm import rank_zero_info
from trainkit.errors import ConfigError

if TYPE_CHECKING:
    from trainkit.module import TrainModule
    from trainkit.trainer.trainer import Trainer

STAGES = ("train", "sanity_check", "validate", "test", "predict")  # Lightning's RunningStage
_DURATION = re.compile(r"(\d+):(\d\d):(\d\d):(\d\d)")


def parse_duration(duration: str | timedelta | dict[str, int] | None) -> timedelta | None:
    """'DD:HH:MM:SS', a timedelta, or timedelta keywords such as {'hours': 2}."""
    if duration is None or isinstance(duration, timedelta):
        return duration
    if isinstance(duration, dict):
        try:
            return timedelta(**duration)
        except TypeError as error:
            raise ConfigError(
                "Timer duration", duration, "timedelta keywords such as {'hours': 2}"
            ) from error
    match = _DURATION.fullmatch(str(duration).strip())
    if not match:
        raise ConfigError("Timer duration", duration, "a string DD:HH:MM:SS such as '00:12:00:00'")
    days, hours, minutes, seconds = (int(part) for part in match.groups())
    return timedelta(days=days, hours=hours, minutes=minutes, seconds=seconds)


class Timer(Callback):
    """Stop training once ``duration`` of training time has passed (checked each step or epoch).

    The time used is kept in checkpoints, so a resumed fit counts it."""

    def __init__(
        self,
        duration: str | timedelta | dict[str, int] | None = None,
        interval: str = "step",
        verbose: bool = True,
    ) -> None:
        """
        Args:
            duration: Training time allowed: 'DD:HH:MM:SS', a timedelta, {'hours': 2} or None.
            interval: Check the time after every 'step' or every 'epoch'.
            verbose: Print a line when the time limit stops training.
        """
        if interval not in ("step", "epoch"):
            raise ConfigError("Timer interval", interval, "'step' or 'epoch'")
        limit = parse_duration(duration)
        self._duration = limit.total_seconds() if limit is not None else None
        self._interval = interval
        self._verbose = verbose
        self._start_time: dict[str, float | None] = dict.fromkeys(STAGES)
        self._end_time: dict[str, float | None] = dict.fromkeys(STAGES)
        self._offset = 0.0  # training time of the runs this one resumes

    def start_time(self, stage: str = "train") -> float | None:
        """When ``stage`` started (time.monotonic), or None."""
        return self._start_time[_stage(stage)]

    def end_time(self, stage: str = "train") -> float | None:
        """When ``stage`` ended (time.monotonic), or None."""
        return self._end_time[_stage(stage)]

    def time_elapsed(self, stage: str = "train") -> float:
        """Seconds spent in ``stage`` (for 'train': including the resumed runs' time)."""
        stage = _stage(stage)
        start, end = self._start_time[stage], self._end_time[stage]
        offset = self._offset if stage == "train" else 0.0
        if start is None:
            return offset
        return (time.monotonic() if end is None else end) - start + offset

    def time_remaining(self, stage: str = "train") -> float | None:
        """Seconds left of the duration (None without a duration)."""
        return None if self._duration is None else self._duration - self.time_elapsed(stage)

    def _begin(self, stage: str) -> None:
        self._start_time[stage], self._end_time[stage] = time.monotonic(), None

    def _end(self, stage: str) -> None:
        self._end_time[stage] = time.monotonic()

    def on_train_start(self, trainer: Trainer, module: TrainModule) -> None:
        self._begin("train")

    def on_train_end(self, trainer: Trainer, module: TrainModule) -> None:
        self._end("train")

    def on_sanity_check_start(self, trainer: Trainer, module: TrainModule) -> None:
        self._begin("sanity_check")

    def on_sanity_check_end(self, trainer: Trainer, module: TrainModule) -> None:
        self._end("sanity_check")

    def on_validation_start(self, trainer: Trainer, module: TrainModule) -> None:
        if not trainer.sanity_checking:
            self._begin("validate")

    def on_validation_end(self, trainer: Trainer, module: TrainModule) -> None:
        if not trainer.sanity_checking:
            self._end("validate")

    def on_test_start(self, trainer: Trainer, module: TrainModule) -> None:
        self._begin("test")

    def on_test_end(self, trainer: Trainer, module: TrainModule) -> None:
        self._end("test")

    def on_predict_start(self, trainer: Trainer, module: TrainModule) -> None:
        self._begin("predict")

    def on_predict_end(self, trainer: Trainer, module: TrainModule) -> None:
        self._end("predict")

    def on_fit_start(self, trainer: Trainer, module: TrainModule) -> None:
        if self._duration is not None:  # a resumed run may have no time left
            self._check_time_remaining(trainer, self._duration)

    def on_train_batch_end(
        self,
        trainer: Trainer,
        module: TrainModule,
        outputs: object,
        batch: object,
        batch_idx: int,
    ) -> None:
        if self._interval == "step" and self._duration is not None:
            self._check_time_remaining(trainer, self._duration)

    def on_train_epoch_end(self, trainer: Trainer, module: TrainModule) -> None:
        if self._interval == "epoch" and self._duration is not None:
            self._check_time_remaining(trainer, self._duration)

    def _check_time_remaining(self, trainer: Trainer, duration: float) -> None:
        should_stop = bool(trainer.strategy.broadcast(self.time_elapsed() >= duration))
        if not should_stop:
            return
        trainer.should_stop = True
        if self._verbose:
            elapsed = timedelta(seconds=int(self.time_elapsed("train")))
            rank_zero_info(
                f"Time limit reached. Elapsed time is {elapsed}. Signaling Trainer to stop."
            )

    def state_dict(self) -> dict[str, Any]:
        return {"time_elapsed": {stage: self.time_elapsed(stage) for stage in STAGES}}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._offset = float(state_dict.get("time_elapsed", {}).get("train", 0.0))


def _stage(stage: str) -> str:
    if stage not in STAGES:
        raise ConfigError("Timer stage", stage, f"one of {', '.join(STAGES)}")
    return stage
