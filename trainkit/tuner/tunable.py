"""The Trainer as the tuner drives it: its public members and the whole run state, whose
loaders, optimizers and callbacks a search swaps for its trials. The Trainer itself, named for
the type checker."""

from __future__ import annotations

from typing import TYPE_CHECKING, TypeAlias

if TYPE_CHECKING:
    from trainkit.trainer.trainer import Trainer

TunableTrainer: TypeAlias = "Trainer"
