"""LearningRateFinder: an LR range test at the start of fit, the suggested rate written to the
model's ``lr``/``learning_rate`` and used by the fit that follows."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

from trainkit.callbacks.base import Callback
from trainkit.callbacks.trainer_view import TrainerView
from trainkit.errors import ConfigError

if TYPE_CHECKING:
    from trainkit.module import TrainModule
    from trainkit.tuner.lr_finder import LRFinder
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

    SUPPORTED_MODES = ("linear", "exponential")
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
        mode = mode.lower()
        if mode not in self.SUPPORTED_MODES:
            raise ConfigError("LearningRateFinder mode", mode, f"one of {self.SUPPORTED_MODES}")
        self._min_lr = min_lr
        self._max_lr = max_lr
        self._num_training_steps = num_training_steps
        self._mode = mode
        self._early_stop_threshold = early_stop_threshold
        self._update_attr = update_attr
        self._attr_name = attr_name
        self.early_exit = False  # the Tuner's: end the stage once the search is done
        self.optimal_lr: LRFinder | None = None

    def lr_find(self, trainer: TrainerView, pl_module: TrainModule) -> None:
        """Run the range test now (every rank); the result goes to ``optimal_lr``."""
        from trainkit.tuner.lr_search import lr_find
        from trainkit.tuner.search import TunerExit

        self.optimal_lr = lr_find(
            cast("TunableTrainer", trainer),  # the Trainer calling a hook: it is one
            pl_module,
            min_lr=self._min_lr,
            max_lr=self._max_lr,
            num_training=self._num_training_steps,
            mode=self._mode,
            early_stop_threshold=self._early_stop_threshold,
            update_attr=self._update_attr,
            attr_name=self._attr_name,
        )
        if self.early_exit:
            raise TunerExit()

    def on_fit_start(self, trainer: TrainerView, pl_module: TrainModule) -> None:
        self.lr_find(trainer, pl_module)

    def state_dict(self) -> dict[str, Any]:
        """The last search's result (so a spawned rank's comes back to the caller)."""
        return {"optimal_lr": None if self.optimal_lr is None else self.optimal_lr.state_dict()}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        from trainkit.tuner.lr_finder import LRFinder

        found = state_dict.get("optimal_lr")
        if found is not None:
            self.optimal_lr = LRFinder.from_state_dict(found)
