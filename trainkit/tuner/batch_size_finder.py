"""BatchSizeFinder: at the start of fit (or validate, test, predict), find the largest batch
size that fits in memory and go on with it (the search itself: ``batch_size_scaling.py``)."""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, Any, cast

from trainkit.callbacks.base import Callback
from trainkit.errors import MisconfigurationError
from trainkit.tuner.settings import BATCH_SIZE_MODES, BatchSizeSearchSettings

if TYPE_CHECKING:
    from trainkit.module import TrainModule
    from trainkit.trainer.trainer import Trainer
    from trainkit.tuner.tunable import TunableTrainer


class BatchSizeFinder(Callback):
    """Lightning's BatchSizeFinder: run ``steps_per_trial`` steps at growing batch sizes until
    one runs out of memory, write the largest that fitted to the ``batch_arg_name`` attribute
    (model, its hparams, the datamodule or its hparams), restore the weights and optimizer, and
    go on with loaders at that size. Under ddp every rank runs each trial and rank 0's size is
    every rank's. Override ``on_fit_start`` and call ``scale_batch_size`` from another hook to
    search at other epochs.

    Args:
        mode: 'power' (double until a size does not fit) or 'binsearch' (then bisect between
            the last size that fitted and the first that did not).
        steps_per_trial: Steps run at each size.
        init_val: The first size tried.
        max_trials: The most sizes tried.
        batch_arg_name: The attribute the loaders read their batch size from.
        margin: In 'binsearch', reduce the size found by this fraction, for headroom.
        max_val: The largest size tried.
    """

    SUPPORTED_MODES = BATCH_SIZE_MODES
    order = -1  # before the other callbacks: they see the stage that follows the search

    def __init__(
        self,
        mode: str = "power",
        steps_per_trial: int = 3,
        init_val: int = 2,
        max_trials: int = 25,
        batch_arg_name: str = "batch_size",
        margin: float = 0.05,
        max_val: int = 8192,
    ) -> None:
        self.settings = BatchSizeSearchSettings(
            mode.lower(), steps_per_trial, init_val, max_trials, batch_arg_name, margin, max_val
        )
        self.optimal_batch_size: int | None = init_val
        self.early_exit = False  # the Tuner's: end the stage once the search is done

    def setup(self, trainer: Trainer, pl_module: TrainModule, stage: str) -> None:
        from trainkit.tuner.attributes import has_attribute

        name = self.settings.batch_arg_name
        if not has_attribute(pl_module, name, trainer.datamodule):
            raise MisconfigurationError(
                f"Field {name} not found in `model`, `datamodule`, nor their `hparams` "
                f"attributes; give one of them a `{name}` the loaders read, or pass "
                "batch_arg_name"
            )
        if hasattr(pl_module, name) and name in pl_module.hparams and trainer.is_global_zero:
            warnings.warn(
                f"Field `model.{name}` and `model.hparams.{name}` are mutually exclusive! "
                f"`model.{name}` will be used as the initial batch size for scaling. If this is "
                "not the intended behavior, please remove either one."
            )

    def scale_batch_size(self, trainer: Trainer, pl_module: TrainModule) -> None:
        """Run the search now (every rank); the size found goes to ``optimal_batch_size``."""
        from trainkit.tuner.batch_size_scaling import scale_batch_size
        from trainkit.tuner.search import TunerExit

        # the Trainer calling a hook: it is one
        self.optimal_batch_size = scale_batch_size(cast("TunableTrainer", trainer), self.settings)
        if self.early_exit:
            raise TunerExit()

    def on_fit_start(self, trainer: Trainer, pl_module: TrainModule) -> None:
        self.scale_batch_size(trainer, pl_module)

    def on_validation_start(self, trainer: Trainer, pl_module: TrainModule) -> None:
        if trainer.sanity_checking or trainer.state.fn != "validate":
            return
        self.scale_batch_size(trainer, pl_module)

    def on_test_start(self, trainer: Trainer, pl_module: TrainModule) -> None:
        self.scale_batch_size(trainer, pl_module)

    def on_predict_start(self, trainer: Trainer, pl_module: TrainModule) -> None:
        self.scale_batch_size(trainer, pl_module)

    def state_dict(self) -> dict[str, Any]:
        """The size found (so a spawned rank's comes back to the caller)."""
        return {"optimal_batch_size": self.optimal_batch_size}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.optimal_batch_size = state_dict.get("optimal_batch_size", self.optimal_batch_size)
