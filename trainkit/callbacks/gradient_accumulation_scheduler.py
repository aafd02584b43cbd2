"""GradientAccumulationScheduler: change accumulate_grad_batches at given epochs."""

from __future__ import annotations

from typing import TYPE_CHECKING

from trainkit.callbacks.base import Callback
from trainkit.errors import ConfigError, MisconfigurationError

if TYPE_CHECKING:
    from trainkit.module import TrainModule
    from trainkit.trainer.trainer import Trainer


class GradientAccumulationScheduler(Callback):
    """Accumulate ``scheduling[epoch]`` batches per step from that epoch on, e.g. {0: 1, 4: 2}."""

    def __init__(self, scheduling: dict[int, int]) -> None:
        """
        Args:
            scheduling: Epoch (from 0) -> batches to accumulate from that epoch on.
        """
        if not scheduling:
            raise ConfigError(
                "GradientAccumulationScheduler scheduling",
                scheduling,
                "a non-empty {epoch: factor}",
            )
        if any(isinstance(k, bool) or not isinstance(k, int) or k < 0 for k in scheduling):
            raise ConfigError("GradientAccumulationScheduler epochs", list(scheduling), "ints >= 0")
        factors = list(scheduling.values())
        if any(isinstance(v, bool) or not isinstance(v, int) or v < 1 for v in factors):
            raise ConfigError(
                "GradientAccumulationScheduler accumulation factors", factors, "ints >= 1"
            )
        self.scheduling = dict(scheduling)
        self.scheduling.setdefault(0, 1)
        self.epochs = sorted(self.scheduling)
        self._last_set: int | None = None

    def going_to_accumulate_grad_batches(self) -> bool:
        """Whether any epoch accumulates more than one batch."""
        return any(factor > 1 for factor in self.scheduling.values())

    def get_accumulate_grad_batches(self, epoch: int) -> int:
        """The accumulation factor of ``epoch``."""
        started = [start for start in self.epochs if start <= epoch]
        return self.scheduling[started[-1]] if started else 1

    def on_train_start(self, trainer: Trainer, module: TrainModule) -> None:
        if not module.automatic_optimization:
            raise MisconfigurationError(
                "GradientAccumulationScheduler works with automatic optimization only; remove "
                "the callback or set self.automatic_optimization = True"
            )
        if trainer.accumulate_grad_batches not in (1, self._last_set):
            raise ConfigError(
                "trainer.accumulate_grad_batches",
                trainer.accumulate_grad_batches,
                "1 with GradientAccumulationScheduler",
                "remove accumulate_grad_batches from the Trainer or remove the callback",
            )

    def on_train_epoch_start(self, trainer: Trainer, module: TrainModule) -> None:
        self._last_set = self.get_accumulate_grad_batches(trainer.current_epoch)
        trainer.accumulate_grad_batches = self._last_set
