"""The run state: one object the Trainer builds and hands to the loops, the training step,
checkpoint dump/restore, preemption and the launchers.

Near the ground floor at run time: it imports nothing of trainkit outside this package but
Lightning's enum base (``common/enums.py``, a leaf), so any part may import it; the classes its
fields hold (the hook dispatcher, the metric hub, the training step...) are named for the type
checker only. Its parts are small dataclasses: where the run is (``LoopPosition``, with its own
``state_dict``), the limits it runs under (``LoopLimits``, frozen), why it stops or resumes
(``StopState``), what a stage is given (``StageInputs``, frozen, replaced whole), everything
together (``RunState``), and Lightning's enums of what runs (``stages.py``: ``TrainerFn``,
``RunningStage``, ``TrainerStatus``, ``TrainerState``).
"""

from trainkit.state.inputs import StageInputs
from trainkit.state.limits import LoopLimits
from trainkit.state.position import LoopPosition
from trainkit.state.run import RunState
from trainkit.state.stages import RunningStage, TrainerFn, TrainerState, TrainerStatus
from trainkit.state.stop import ResumePoint, StopState

__all__ = [
    "LoopLimits",
    "LoopPosition",
    "ResumePoint",
    "RunState",
    "RunningStage",
    "StageInputs",
    "StopState",
    "TrainerFn",
    "TrainerState",
    "TrainerStatus",
]
