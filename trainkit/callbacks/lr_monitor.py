"""LearningRateMonitor: log every optimizer param group's learning rate."""

from __future__ import annotations

from typing import Any

from trainkit.callbacks.base import Callback
from trainkit.errors import ConfigError


class LearningRateMonitor(Callback):
    """Log ``lr-<Optimizer>`` (``/pg<i>`` for several groups) each step or each epoch."""

    def __init__(self, logging_interval: str = "epoch") -> None:
        if logging_interval not in ("step", "epoch"):
            raise ConfigError(
                "LearningRateMonitor logging_interval", logging_interval, "'step' or 'epoch'"
            )
        self.logging_interval = logging_interval

    def learning_rates(self, trainer: Any) -> dict[str, float]:
        rates: dict[str, float] = {}
        for index, optimizer in enumerate(trainer.optimizers):
            name = f"lr-{type(optimizer).__name__}"
            if len(trainer.optimizers) > 1:
                name += f"-{index}"
            groups = optimizer.param_groups
            for group_index, group in enumerate(groups):
                key = name if len(groups) == 1 else f"{name}/pg{group_index + 1}"
                rates[key] = float(group["lr"])
        return rates

    def on_train_batch_start(self, trainer: Any, module: Any, batch: Any, batch_idx: int) -> None:
        if self.logging_interval == "step" and trainer.global_step % trainer.log_every_n_steps == 0:
            trainer.log_to_loggers(self.learning_rates(trainer), trainer.global_step)

    def on_train_epoch_start(self, trainer: Any, module: Any) -> None:
        if self.logging_interval == "epoch":
            trainer.log_to_loggers(self.learning_rates(trainer), trainer.global_step)
