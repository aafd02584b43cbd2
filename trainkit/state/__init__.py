"""The run state: one object the Trainer builds and hands to the loops, the training step,
checkpoint dump/restore, preemption and the launchers.

A leaf at run time: it imports nothing of trainkit outside this package, so any part may import
it; the classes its fields hold are named for the type checker only, and only where that closes
no import circle (the rest are Protocols of what the loops call). Its parts are small
dataclasses: where the run is (``LoopPosition``, with its own ``state_dict``), the limits it runs
under (``LoopLimits``, frozen), why it stops or resumes (``StopState``), and the parts the loops
drive, typed by the Protocols of what the loops call (``protocols.py``) or by their classes.
"""

from trainkit.state.limits import LoopLimits
from trainkit.state.position import LoopPosition
from trainkit.state.protocols import (
    Hooks,
    Metrics,
    PredictRecord,
    RankMarker,
    Stepper,
    StopWatch,
)
from trainkit.state.run import RunState
from trainkit.state.stop import ResumePoint, StopState

__all__ = [
    "Hooks",
    "LoopLimits",
    "LoopPosition",
    "Metrics",
    "PredictRecord",
    "RankMarker",
    "ResumePoint",
    "RunState",
    "Stepper",
    "StopState",
    "StopWatch",
]
