"""What the Trainer is doing, in Lightning's words: ``trainer.state`` (the method running, the
loop in it, the status) and the flags ``training`` / ``validating`` / ``testing`` /
``predicting`` / ``sanity_checking`` / ``evaluating`` / ``interrupted``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from trainkit.state import RunningStage, RunState, TrainerStatus
from trainkit.trainer.readouts.readout import Readout

if TYPE_CHECKING:
    from trainkit.trainer.trainer import Trainer


class StageFlag(Readout[bool]):
    """Lightning's flag of one stage: True while its loop runs; setting it True enters the
    stage, setting it False leaves it (only if it is the one running)."""

    def __init__(self, stage: RunningStage) -> None:
        def running(trainer: Trainer) -> bool:
            return trainer.run_state.trainer_state.stage is stage

        def enter_or_leave(trainer: Trainer, value: bool) -> None:
            now = trainer.run_state.trainer_state
            if value:
                now.stage = stage
            elif now.stage is stage:
                now.stage = None

        doc = f"Whether the {stage.value} loop is running (settable)."
        super().__init__(running, doc, enter_or_leave)

    if TYPE_CHECKING:  # settable, where a plain read-out is not

        def __set__(self, instance: object, value: bool, /) -> None: ...


class StatusReadouts:
    """``trainer.state`` and the stage flags (Lightning's; the flags are settable)."""

    run_state: RunState

    state = Readout(
        lambda t: t.run_state.trainer_state,
        "What runs: ``state.fn`` (fit, validate, test, predict), ``state.stage`` (the loop in "
        "it), ``state.status`` and ``state.finished``.",
    )
    training = StageFlag(RunningStage.TRAINING)
    validating = StageFlag(RunningStage.VALIDATING)
    testing = StageFlag(RunningStage.TESTING)
    predicting = StageFlag(RunningStage.PREDICTING)
    sanity_checking = StageFlag(RunningStage.SANITY_CHECKING)
    evaluating = Readout(
        lambda t: (stage := t.run_state.trainer_state.stage) is not None and stage.evaluating,
        "Whether validation (also fit's sanity check) or test is running.",
    )
    interrupted = Readout(
        lambda t: t.run_state.trainer_state.status is TrainerStatus.INTERRUPTED,
        "Whether the last stage stopped on an exception.",
    )
