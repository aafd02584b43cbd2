"""The Trainer as the tuner drives it: its public members and the whole run state, whose
loaders, optimizers and callbacks a search swaps for its trials."""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from trainkit.callbacks.trainer_view import TrainerView

if TYPE_CHECKING:
    from trainkit.state import RunState


class TunableTrainer(TrainerView, Protocol):
    """The Trainer's read-outs and stage methods (``TrainerView``) and its ``RunState``."""

    @property
    def run_state(self) -> RunState: ...
