"""What the Trainer is doing, in Lightning's words: ``trainer.state`` (the function running, the
loop in it, the status) and the flags ``training`` / ``validating`` / ``testing`` /
``predicting`` / ``sanity_checking`` / ``evaluating`` / ``interrupted``. The run state keeps the
three as plain strings, which the loops and the stage runner write; these read them as
Lightning's enums (trainer/states.py), whose members equal their strings
(``trainer.state.fn == "fit"``)."""

from __future__ import annotations

from typing import Protocol

from trainkit.state import RunState
from trainkit.trainer.states import RunningStage, TrainerState, TrainerStatus


class OwnsRunState(Protocol):
    run_state: RunState


# ---- the Trainer's read-outs (listed by name in the Trainer's class body) ------------------------
@property
def state(self: OwnsRunState) -> TrainerState:
    """What runs: ``state.fn`` (fit, validate, test, predict), ``state.stage`` (the loop in
    it), ``state.status`` and ``state.finished``."""
    return TrainerState(self.run_state)


def _is_running(owner: OwnsRunState, stage: RunningStage) -> bool:
    return owner.run_state.running_stage == stage.value


def _set_running(owner: OwnsRunState, stage: RunningStage, value: bool) -> None:
    """Lightning's stage flags: setting one True enters its stage, setting it False leaves it
    (only if it is the one running)."""
    if value:
        owner.run_state.running_stage = stage.value
    elif owner.run_state.running_stage == stage.value:
        owner.run_state.running_stage = None


# each flag a property of its own (not built by a factory), so a type checker sees a settable bool
@property
def training(self: OwnsRunState) -> bool:
    """Whether the train loop is running (settable)."""
    return _is_running(self, RunningStage.TRAINING)


@training.setter
def training(self: OwnsRunState, value: bool) -> None:
    _set_running(self, RunningStage.TRAINING, value)


@property
def validating(self: OwnsRunState) -> bool:
    """Whether the validate loop is running (settable)."""
    return _is_running(self, RunningStage.VALIDATING)


@validating.setter
def validating(self: OwnsRunState, value: bool) -> None:
    _set_running(self, RunningStage.VALIDATING, value)


@property
def testing(self: OwnsRunState) -> bool:
    """Whether the test loop is running (settable)."""
    return _is_running(self, RunningStage.TESTING)


@testing.setter
def testing(self: OwnsRunState, value: bool) -> None:
    _set_running(self, RunningStage.TESTING, value)


@property
def predicting(self: OwnsRunState) -> bool:
    """Whether the predict loop is running (settable)."""
    return _is_running(self, RunningStage.PREDICTING)


@predicting.setter
def predicting(self: OwnsRunState, value: bool) -> None:
    _set_running(self, RunningStage.PREDICTING, value)


@property
def sanity_checking(self: OwnsRunState) -> bool:
    """Whether the sanity_check loop is running (settable)."""
    return _is_running(self, RunningStage.SANITY_CHECKING)


@sanity_checking.setter
def sanity_checking(self: OwnsRunState, value: bool) -> None:
    _set_running(self, RunningStage.SANITY_CHECKING, value)


@property
def evaluating(self: OwnsRunState) -> bool:
    """Whether validation (also fit's sanity check) or test is running."""
    running = self.run_state.running_stage
    return running is not None and RunningStage(running).evaluating


@property
def interrupted(self: OwnsRunState) -> bool:
    """Whether the last stage stopped on an exception."""
    return self.run_state.status == TrainerStatus.INTERRUPTED
