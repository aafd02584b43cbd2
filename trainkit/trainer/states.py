"""Lightning's import path ``trainer.states``: ``TrainerFn``, ``RunningStage``, ``TrainerStatus``
and ``TrainerState``, defined with the run state (``trainkit/state/stages.py``)."""

from trainkit.common.enums import LightningEnum
from trainkit.state.stages import RunningStage, TrainerFn, TrainerState, TrainerStatus

__all__ = ["LightningEnum", "RunningStage", "TrainerFn", "TrainerState", "TrainerStatus"]
