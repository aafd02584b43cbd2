"""Lightning's names for what a Trainer is doing: ``TrainerFn`` (the stage a hook's ``stage``
argument names: ``setup(stage)`` receives ``"fit"``, equal to ``TrainerFn.FITTING``),
``RunningStage`` (the loop inside it), ``TrainerStatus`` and ``TrainerState``, all three together.
The enums equal their strings in any case; ``trainer.state`` reads and writes the run state."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from trainkit.utilities.enums import LightningEnum

__all__ = ["LightningEnum", "RunningStage", "TrainerFn", "TrainerState", "TrainerStatus"]


class TrainerStatus(LightningEnum):
    """Whether the Trainer is being built, running a stage, done, or stopped by an exception."""

    INITIALIZING = "initializing"
    RUNNING = "running"
    FINISHED = "finished"
    INTERRUPTED = "interrupted"

    @property
    def stopped(self) -> bool:
        return self in (TrainerStatus.FINISHED, TrainerStatus.INTERRUPTED)


class TrainerFn(LightningEnum):
    """The Trainer method running: ``fit``, ``validate``, ``test`` or ``predict``."""

    FITTING = "fit"
    VALIDATING = "validate"
    TESTING = "test"
    PREDICTING = "predict"


class RunningStage(LightningEnum):
    """The loop running within a Trainer method (fit runs train, sanity_check and validate)."""

    TRAINING = "train"
    SANITY_CHECKING = "sanity_check"
    VALIDATING = "validate"
    TESTING = "test"
    PREDICTING = "predict"

    @property
    def evaluating(self) -> bool:
        return self in (RunningStage.VALIDATING, RunningStage.TESTING, RunningStage.SANITY_CHECKING)

    @property
    def dataloader_prefix(self) -> str:
        """The prefix of the loaders this stage reads: 'train', 'val', 'test' or 'predict'."""
        if self in (RunningStage.VALIDATING, RunningStage.SANITY_CHECKING):
            return "val"
        return self.value


class HoldsStatus(Protocol):
    """Where the three values live as plain strings (the run state, or a TrainerState's own)."""

    stage: str | None
    running_stage: str | None
    status: str


@dataclass
class StatusValues:
    """The values of a TrainerState built on its own (not a Trainer's)."""

    stage: str | None = None
    running_stage: str | None = None
    status: str = TrainerStatus.INITIALIZING.value


class TrainerState:
    """Lightning's ``trainer.state``: ``status``, ``fn`` and ``stage``. A Trainer's reads and
    writes its run state, so it always tells what runs now; ``TrainerState(status, fn, stage)``
    holds its own values, as Lightning's dataclass does."""

    def __init__(
        self,
        status: TrainerStatus | str | HoldsStatus = TrainerStatus.INITIALIZING,
        fn: TrainerFn | str | None = None,
        stage: RunningStage | str | None = None,
    ) -> None:
        if isinstance(status, str):
            values = StatusValues(
                None if fn is None else TrainerFn(fn).value,
                None if stage is None else RunningStage(stage).value,
                TrainerStatus(status).value,
            )
            self._values: HoldsStatus = values
        else:
            self._values = status  # a run state: the Trainer's own view

    @property
    def fn(self) -> TrainerFn | None:
        return None if self._values.stage is None else TrainerFn(self._values.stage)

    @fn.setter
    def fn(self, value: TrainerFn | str | None) -> None:
        self._values.stage = None if value is None else TrainerFn(value).value

    @property
    def stage(self) -> RunningStage | None:
        running = self._values.running_stage
        return None if running is None else RunningStage(running)

    @stage.setter
    def stage(self, value: RunningStage | str | None) -> None:
        self._values.running_stage = None if value is None else RunningStage(value).value

    @property
    def status(self) -> TrainerStatus:
        return TrainerStatus(self._values.status)

    @status.setter
    def status(self, value: TrainerStatus | str) -> None:
        self._values.status = TrainerStatus(value).value

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

    __hash__ = None  # type: ignore[assignment]  # mutable, compared by value

    def __repr__(self) -> str:
        return f"TrainerState(status={self.status!r}, fn={self.fn!r}, stage={self.stage!r})"
