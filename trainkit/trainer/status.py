"""What the Trainer is doing, in Lightning's words: ``trainer.state`` (the function running, the
loop in it, the status) and the flags ``training`` / ``validating`` / ``testing`` /
``predicting`` / ``sanity_checking`` / ``evaluating`` / ``interrupted``. The run state keeps the
three as plain strings, which the loops and the stage runner write; these read them as
Lightning's enums, whose members equal their strings (``trainer.state.fn == "fit"``)."""

from __future__ import annotations

from enum import StrEnum
from typing import Protocol

from trainkit.loops.state import RunState


class TrainerStatus(StrEnum):
    """Whether the Trainer is being built, running a stage, done, or stopped by an exception."""

    INITIALIZING = "initializing"
    RUNNING = "running"
    FINISHED = "finished"
    INTERRUPTED = "interrupted"

    @property
    def stopped(self) -> bool:
        return self in (TrainerStatus.FINISHED, TrainerStatus.INTERRUPTED)


class TrainerFn(StrEnum):
    """The Trainer method running: fit, validate, test or predict."""

    FITTING = "fit"
    VALIDATING = "validate"
    TESTING = "test"
    PREDICTING = "predict"


class RunningStage(StrEnum):
    """The loop running within a Trainer method (fit runs train, sanity_check and validate)."""

    TRAINING = "train"
    SANITY_CHECKING = "sanity_check"
    VALIDATING = "validate"
    TESTING = "test"
    PREDICTING = "predict"

    @property
    def evaluating(self) -> bool:
        return self in (
            RunningStage.VALIDATING,
            RunningStage.TESTING,
            RunningStage.SANITY_CHECKING,
        )

    @property
    def dataloader_prefix(self) -> str:
        """The prefix of the loaders this stage reads: 'train', 'val', 'test' or 'predict'."""
        evaluating_val = self in (RunningStage.VALIDATING, RunningStage.SANITY_CHECKING)
        return "val" if evaluating_val else self.value


class TrainerState:
    """Lightning's ``trainer.state``: ``fn``, ``stage`` and ``status``, read from and written to
    the run state (so it always tells the stage running now)."""

    def __init__(self, run: RunState) -> None:
        self._run = run

    @property
    def fn(self) -> TrainerFn | None:
        return None if self._run.stage is None else TrainerFn(self._run.stage)

    @fn.setter
    def fn(self, value: TrainerFn | str | None) -> None:
        self._run.stage = None if value is None else TrainerFn(value).value

    @property
    def stage(self) -> RunningStage | None:
        running = self._run.running_stage
        return None if running is None else RunningStage(running)

    @stage.setter
    def stage(self, value: RunningStage | str | None) -> None:
        self._run.running_stage = None if value is None else RunningStage(value).value

    @property
    def status(self) -> TrainerStatus:
        return TrainerStatus(self._run.status)

    @status.setter
    def status(self, value: TrainerStatus | str) -> None:
        self._run.status = TrainerStatus(value).value

    @property
    def finished(self) -> bool:
        return self.status == TrainerStatus.FINISHED

    @property
    def stopped(self) -> bool:
        return self.status.stopped

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, TrainerState):
            return NotImplemented
        return (self.status, self.fn, self.stage) == (other.status, other.fn, other.stage)

    def __repr__(self) -> str:
        return f"TrainerState(status={self.status!r}, fn={self.fn!r}, stage={self.stage!r})"


class OwnsRunState(Protocol):
    run_state: RunState


# ---- the Trainer's read-outs (listed by name in the Trainer's class body) ------------------------
@property
def state(self: OwnsRunState) -> TrainerState:
    """What runs: ``state.fn`` (fit, validate, test, predict), ``state.stage`` (the loop in
    it), ``state.status`` and ``state.finished``."""
    return TrainerState(self.run_state)


def _stage_flag(stage: RunningStage) -> property:
    """Lightning's flag for ``stage``: True while it runs; setting it True enters it, setting it
    False leaves it (only if it is the one running)."""

    def read(self: OwnsRunState) -> bool:
        return self.run_state.running_stage == stage.value

    def write(self: OwnsRunState, value: bool) -> None:
        if value:
            self.run_state.running_stage = stage.value
        elif self.run_state.running_stage == stage.value:
            self.run_state.running_stage = None

    return property(read, write, doc=f"Whether the {stage.value} loop is running (settable).")


training = _stage_flag(RunningStage.TRAINING)
validating = _stage_flag(RunningStage.VALIDATING)
testing = _stage_flag(RunningStage.TESTING)
predicting = _stage_flag(RunningStage.PREDICTING)
sanity_checking = _stage_flag(RunningStage.SANITY_CHECKING)


@property
def evaluating(self: OwnsRunState) -> bool:
    """Whether validation (also fit's sanity check) or test is running."""
    running = self.run_state.running_stage
    return running is not None and RunningStage(running).evaluating


@property
def interrupted(self: OwnsRunState) -> bool:
    """Whether the last stage stopped on an exception."""
    return self.run_state.status == TrainerStatus.INTERRUPTED
