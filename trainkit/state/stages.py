"""Lightning's names for what a Trainer is doing (its ``lightning.pytorch.trainer.states``):
``TrainerFn`` (the Trainer method running: ``setup(stage)`` receives ``"fit"``, equal to
``TrainerFn.FITTING``), ``RunningStage`` (the loop inside it), ``TrainerStatus`` and
``TrainerState``, the three together. The enums are str enums that equal their values in any
case, so ``trainer.state.fn == "fit"`` holds as in Lightning. ``trainkit.trainer.states`` is
their Lightning-named import path."""

from __future__ import annotations

from dataclasses import dataclass

from trainkit.common.enums import LightningEnum


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


# what each field holds: a value given as a string becomes the member (``state.fn = "fit"``)
_FIELD_ENUMS: dict[str, type[LightningEnum]] = {
    "status": TrainerStatus,
    "fn": TrainerFn,
    "stage": RunningStage,
}


@dataclass
class TrainerState:
    """Lightning's ``trainer.state``: the ``status``, the method running (``fn``) and the loop
    in it (``stage``; None between loops). The run state holds the Trainer's, which the stage
    runner and the loops write."""

    status: TrainerStatus = TrainerStatus.INITIALIZING
    fn: TrainerFn | None = None
    stage: RunningStage | None = None

    def __setattr__(self, name: str, value: object) -> None:
        enum = _FIELD_ENUMS.get(name)
        if enum is not None and value is not None and not isinstance(value, enum):
            value = enum(value)
        super().__setattr__(name, value)

    @property
    def finished(self) -> bool:
        return self.status is TrainerStatus.FINISHED

    @property
    def stopped(self) -> bool:
        return self.status.stopped
