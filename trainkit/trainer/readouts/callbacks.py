"""The Trainer's callbacks, as Lightning names them: the list, and the finders of the
checkpointing, early-stopping and progress-bar callbacks among them."""

from __future__ import annotations

from typing import TYPE_CHECKING

from trainkit.callbacks.base import Callback
from trainkit.state import RunState

if TYPE_CHECKING:
    from trainkit.callbacks.checkpoint import ModelCheckpoint
    from trainkit.callbacks.early_stopping import EarlyStopping
    from trainkit.callbacks.progress import ProgressBar


def find_checkpoint_callback(callbacks: list[Callback]) -> ModelCheckpoint | None:
    """The first ``ModelCheckpoint`` among ``callbacks`` (Lightning's ``checkpoint_callback``)."""
    from trainkit.callbacks.checkpoint import ModelCheckpoint

    return next((cb for cb in callbacks if isinstance(cb, ModelCheckpoint)), None)


class CallbackReadouts:
    """``callbacks`` and the callback finders (Lightning's names)."""

    run_state: RunState

    @property
    def callbacks(self) -> list[Callback]:
        return self.run_state.given.callbacks

    @property
    def checkpoint_callback(self) -> ModelCheckpoint | None:
        return find_checkpoint_callback(self.run_state.given.callbacks)

    @property
    def checkpoint_callbacks(self) -> list[Callback]:
        """Every callback that writes checkpoints (ModelCheckpoint, OnExceptionCheckpoint...)."""
        from trainkit.callbacks.base import Checkpoint

        return [cb for cb in self.run_state.given.callbacks if isinstance(cb, Checkpoint)]

    @property
    def early_stopping_callbacks(self) -> list[EarlyStopping]:
        from trainkit.callbacks.early_stopping import EarlyStopping

        return [cb for cb in self.run_state.given.callbacks if isinstance(cb, EarlyStopping)]

    @property
    def early_stopping_callback(self) -> EarlyStopping | None:
        return next(iter(self.early_stopping_callbacks), None)

    @property
    def progress_bar_callback(self) -> ProgressBar | None:
        from trainkit.callbacks.progress import ProgressBar

        callbacks = self.run_state.given.callbacks
        return next((cb for cb in callbacks if isinstance(cb, ProgressBar)), None)
