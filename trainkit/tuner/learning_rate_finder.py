"""LearningRateFinder: an LR range test at the start of fit, the suggested rate written to the
model's ``lr``/``learning_rate`` and used by the fit that follows (the test itself:
``lr_range_test.py``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from trainkit.callbacks.base import Callback
from trainkit.tuner.settings import RANGE_TEST_MODES, RangeTestSettings

if TYPE_CHECKING:
    from trainkit.module import TrainModule
    from trainkit.trainer.trainer import Trainer
    from trainkit.tuner.lr_range_test import LRFinder
    from trainkit.tuner.tunable import TunableTrainer


class LearningRateFinder(Callback):
    """Lightning's LearningRateFinder: at fit start, train ``num_training_steps`` steps with the
    rate rising from ``min_lr`` to ``max_lr``, then restore the weights and optimizer and (with
    ``update_attr``) continue at the suggested rate. Override ``on_fit_start`` and call
    ``lr_find`` from another hook to search at other epochs.

    Args:
        min_lr: The rate of the first step.
        max_lr: The rate of the last step.
        num_training_steps: Steps (rates) to try.
        mode: 'exponential' (rates evenly spaced on a log scale) or 'linear'.
        early_stop_threshold: Stop once the smoothed loss exceeds this many times the best
            (None: never).
        update_attr: Write the suggested rate to the model's ``lr`` or ``learning_rate``
            (or ``attr_name``), in the model, its hparams or the datamodule.
        attr_name: The attribute holding the rate, when it is not ``lr``/``learning_rate``.
    """

    SUPPORTED_MODES = RANGE_TEST_MODES
    order = -1  # before the other callbacks: they see the fit that follows the search

    def __init__(
        self,
        min_lr: float = 1e-8,
        max_lr: float = 1,
        num_training_steps: int = 100,
        mode: str = "exponential",
        early_stop_threshold: float | None = 4.0,
        update_attr: bool = True,
        attr_name: str = "",
    ) -> None:
        self.settings = RangeTestSettings(
            min_lr,
            max_lr,
            num_training_steps,
            mode.lower(),
            early_stop_threshold,
            update_attr,
            attr_name,
        )
        self.early_exit = False  # the Tuner's: end the stage once the search is done
        self.optimal_lr: LRFinder | None = None

    def lr_find(self, trainer: Trainer, pl_module: TrainModule) -> None:
        """Run the range test now (every rank); the result goes to ``optimal_lr``."""
        from trainkit.tuner.lr_range_test import lr_find
        from trainkit.tuner.search import TunerExit

        # the Trainer calling a hook: it is one
        self.optimal_lr = lr_find(cast("TunableTrainer", trainer), pl_module, self.settings)
        if self.early_exit:
            raise TunerExit()

    def on_fit_start(self, trainer: Trainer, pl_module: TrainModule) -> None:
        self.lr_find(trainer, pl_module)

    def state_dict(self) -> dict[str, Any]:
        """The last search's result (so a spawned rank's comes back to the caller)."""
        return {"optimal_lr": None if self.optimal_lr is None else self.optimal_lr.state_dict()}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        from trainkit.tuner.lr_range_test import LRFinder

        found = state_dict.get("optimal_lr")
        if found is not None:
            self.optimal_lr = LRFinder.from_state_dict(found)
