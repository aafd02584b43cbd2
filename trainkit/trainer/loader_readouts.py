"""The Trainer's read-outs of a stage's loaders, as Lightning names them: the loaders of fit,
validate, test and predict, their batch counts (limits applied), and whether fit validates.
Plain properties that the ``Trainer`` class body lists by name."""

from __future__ import annotations

from typing import Any, Protocol

from trainkit.callbacks.base import overrides
from trainkit.datamodule import DataModule
from trainkit.module import TrainModule
from trainkit.state import RunState


class OwnsRunState(Protocol):
    run_state: RunState


@property
def train_loader(self: OwnsRunState) -> Any:
    return self.run_state.train_loader


@property
def val_loaders(self: OwnsRunState) -> list[Any]:
    return self.run_state.val_loaders


@property
def train_dataloader(self: OwnsRunState) -> Any:
    """The fit's training DataLoader (Lightning's name), as the strategy prepared it."""
    return self.run_state.train_loader


def one_or_list(loaders: list[Any]) -> Any:
    """A stage's loaders as Lightning gives them: the loader, a list of several, or None."""
    return loaders[0] if len(loaders) == 1 else loaders or None


@property
def val_dataloaders(self: OwnsRunState) -> Any:
    """The validation DataLoader of fit (or of validate), or a list of them when there are
    several."""
    return one_or_list(self.run_state.val_loaders)


@property
def test_dataloaders(self: OwnsRunState) -> Any:
    return one_or_list(self.run_state.test_loaders)


@property
def predict_dataloaders(self: OwnsRunState) -> Any:
    return one_or_list(self.run_state.predict_loaders)


def batch_counts(loaders: list[Any], limit: int | float, name: str) -> list[int | float]:
    from trainkit.data import limited_batches

    return [limited_batches(loader, limit, name) for loader in loaders]


@property
def num_val_batches(self: OwnsRunState) -> list[int | float]:
    """Batches of each validation loader (of fit, or of validate), limits applied."""
    limit = self.run_state.limits.limit_val_batches
    return batch_counts(self.run_state.val_loaders, limit, "limit_val_batches")


@property
def num_sanity_val_batches(self: OwnsRunState) -> list[int | float]:
    steps = self.run_state.limits.num_sanity_val_steps
    counts = batch_counts(
        self.run_state.val_loaders, self.run_state.limits.limit_val_batches, "limit_val_batches"
    )
    return counts if steps == -1 else [min(steps, count) for count in counts]


@property
def num_test_batches(self: OwnsRunState) -> list[int | float]:
    limit = self.run_state.limits.limit_test_batches
    return batch_counts(self.run_state.test_loaders, limit, "limit_test_batches")


@property
def num_predict_batches(self: OwnsRunState) -> list[int | float]:
    limit = self.run_state.limits.limit_predict_batches
    return batch_counts(self.run_state.predict_loaders, limit, "limit_predict_batches")


@property
def enable_validation(self: OwnsRunState) -> bool:
    """Whether fit validates: the module has a ``validation_step``, there is validation data
    and ``limit_val_batches`` is not 0."""
    state = self.run_state
    module = state.module
    if module is None or not overrides(module, TrainModule, "validation_step"):
        return False
    data = state.datamodule
    source, base = (data, DataModule) if data is not None else (module, TrainModule)
    has_data = bool(state.val_loaders) or overrides(source, base, "val_dataloader")
    return has_data and state.limits.limit_val_batches > 0
