"""What the Trainer is doing, in Lightning's words: ``trainer.state`` (the function running, the
loop in it, the status) and the flags ``training`` / ``validating`` / ``testing`` /
``predicting`` / ``sanity_checking`` / ``evaluating`` / ``interrupted``. The run state keeps the
three as plain strings, which the loops and the stage runner write; these read them as
Lightning's enums (trainer/states.py), whose members equal their strings
(``trainer.state.fn == "fit"``)."""

from __future__ import annotations

from typing import Protocol

from trainkit.loops.state import RunState
from trainkit.trainer.states import RunningStage, TrainerState, TrainerStatus


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
