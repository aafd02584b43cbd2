"""The Trainer's read-outs of a stage's loaders, as Lightning names them: the loaders of fit,
validate, test and predict, their batch counts (limits applied), and whether fit validates."""

from __future__ import annotations

from typing import Any, Literal

from trainkit.common.hooks import overrides
from trainkit.datamodule import DataModule
from trainkit.module import TrainModule
from trainkit.state import RunState, TrainerFn
from trainkit.trainer.readouts.readout import Readout


def one_or_list(loaders: list[Any]) -> Any:
    """A stage's loaders as Lightning gives them: the loader, a list of several, or None."""
    return loaders[0] if len(loaders) == 1 else loaders or None


def batch_counts(state: RunState, stage: Literal["val", "test", "predict"]) -> list[int | float]:
    """Batches of each of ``stage``'s loaders, its ``limit_<stage>_batches`` applied."""
    from trainkit.data import limited_batches

    name = f"limit_{stage}_batches"
    limit = getattr(state.limits, name)
    return [
        limited_batches(loader, limit, name) for loader in getattr(state.given, f"{stage}_loaders")
    ]


def val_batch_counts(state: RunState) -> list[int | float]:
    """As Lightning's ``num_val_batches``: validate's counts while and after validate runs,
    else the fit's (``[]`` until the fit loaded its validation loaders: it may never)."""
    validating = state.trainer_state.fn is TrainerFn.VALIDATING
    return state.loaded_batches.get(TrainerFn.VALIDATING if validating else TrainerFn.FITTING, [])


def sanity_batch_counts(state: RunState) -> list[int | float]:
    """Batches of each validation loader fit's sanity check runs (of the fit's counts)."""
    steps = state.limits.num_sanity_val_steps
    counts = state.loaded_batches.get(TrainerFn.FITTING, [])
    return counts if steps == -1 else [min(steps, count) for count in counts]


def validation_enabled(state: RunState) -> bool:
    """Whether fit validates: the module has a ``validation_step``, there is validation data and
    ``limit_val_batches`` is not 0."""
    given = state.given
    module = given.module
    if module is None or not overrides(module, TrainModule, "validation_step"):
        return False
    data = given.datamodule
    source, base = (data, DataModule) if data is not None else (module, TrainModule)
    has_data = bool(given.val_loaders) or overrides(source, base, "val_dataloader")
    return has_data and state.limits.limit_val_batches > 0


class LoaderReadouts:
    """The stages' loaders and their batch counts (Lightning's names)."""

    run_state: RunState

    train_loader = Readout(lambda t: t.run_state.given.train_loader)
    val_loaders = Readout(lambda t: t.run_state.given.val_loaders)
    train_dataloader = Readout(
        lambda t: t.run_state.given.train_loader,
        "The fit's training DataLoader (Lightning's name), as the strategy prepared it.",
    )
    val_dataloaders = Readout(
        lambda t: one_or_list(t.run_state.given.val_loaders),
        "The validation DataLoader of fit (or of validate), or a list of them when there are "
        "several.",
    )
    test_dataloaders = Readout(lambda t: one_or_list(t.run_state.given.test_loaders))
    predict_dataloaders = Readout(lambda t: one_or_list(t.run_state.given.predict_loaders))
    num_val_batches = Readout(
        lambda t: val_batch_counts(t.run_state),
        "Batches of each validation loader (of fit, or of validate), limits applied.",
    )
    num_sanity_val_batches = Readout(lambda t: sanity_batch_counts(t.run_state))
    num_test_batches = Readout(
        lambda t: t.run_state.loaded_batches.get(TrainerFn.TESTING, []),
        "Batches of each test loader of the latest test that loaded them, limits applied.",
    )
    num_predict_batches = Readout(lambda t: batch_counts(t.run_state, "predict"))
    enable_validation = Readout(
        lambda t: validation_enabled(t.run_state), validation_enabled.__doc__
    )
