"""LearningRateMonitor: log every optimizer param group's learning rate."""

from __future__ import annotations

import warnings
from collections import defaultdict
from typing import TYPE_CHECKING, Any, Literal

import torch

from trainkit.callbacks.base import Callback
from trainkit.errors import ConfigError, MisconfigurationError

if TYPE_CHECKING:
    from trainkit.module import TrainModule
    from trainkit.trainer.trainer import Trainer


class LearningRateMonitor(Callback):
    """Log each optimizer's learning rate (``lr-SGD``, ``lr-Adam/pg2``...) to the loggers.

    Optimizers with a scheduler are logged at its interval, the others at every step and epoch
    start (unless ``logging_interval`` picks one); the rates also join the callback metrics, so a
    callback can monitor them."""

    def __init__(
        self,
        logging_interval: Literal["step", "epoch"] | None = None,
        log_momentum: bool = False,
        log_weight_decay: bool = False,
    ) -> None:
        """
        Args:
            logging_interval: 'step' or 'epoch' for every optimizer; None: each scheduler's interval.
            log_momentum: Also log the momentum (or Adam's first beta) as ``<name>-momentum``.
            log_weight_decay: Also log the weight decay as ``<name>-weight_decay``.
        """
        if logging_interval not in (None, "step", "epoch"):
            raise ConfigError(
                "LearningRateMonitor logging_interval", logging_interval, "'step', 'epoch' or null"
            )
        self.logging_interval = logging_interval
        self.log_momentum = log_momentum
        self.log_weight_decay = log_weight_decay
        self.lrs: dict[str, list[float]] = {}

    def on_train_start(self, trainer: Trainer, module: TrainModule) -> None:
        if not trainer.loggers:
            raise MisconfigurationError(
                "Cannot use `LearningRateMonitor` callback with `Trainer` that has no logger."
            )
        if self.log_momentum and not all(
            "momentum" in o.defaults or "betas" in o.defaults for o in trainer.optimizers
        ):
            warnings.warn(
                "You have set log_momentum=True, but some optimizers do not have momentum. This "
                "will log a value 0 for the momentum.",
                RuntimeWarning,
                stacklevel=2,
            )

    def on_train_batch_start(
        self, trainer: Trainer, module: TrainModule, batch: object, batch_idx: int
    ) -> None:
        # as Lightning: before the batch whose optimizer step is a multiple of
        # log_every_n_steps (or the last before a stop), at the steps taken so far
        every = trainer.log_every_n_steps
        stepped = trainer.run_state.position.batches_stepped
        if self.logging_interval != "epoch" and (
            (every and (stepped + 1) % every == 0) or trainer.should_stop
        ):
            self._log(trainer, "step" if self.logging_interval is None else "any")

    def on_train_epoch_start(self, trainer: Trainer, module: TrainModule) -> None:
        if self.logging_interval != "step":
            self._log(trainer, "epoch" if self.logging_interval is None else "any")

    def _log(self, trainer: Trainer, interval: str) -> None:
        stats = self.learning_rates(trainer, interval)
        if not stats:
            return
        trainer.log_to_loggers(stats, trainer.run_state.position.batches_stepped)
        # as in Lightning, the rates are callback metrics too (a monitor can watch them)
        trainer.run_state.metrics.epoch_metrics.update(
            {name: torch.tensor(float(value)) for name, value in stats.items()}
        )

    def learning_rates(self, trainer: Trainer, interval: str = "any") -> dict[str, float]:
        """The rates (and momentum, weight decay) of the optimizers due at ``interval``
        ('step', 'epoch' or 'any'), by name."""
        scheduled = {id(c.scheduler.optimizer): c.interval for c in trainer.lr_scheduler_configs}
        seen: dict[str, int] = defaultdict(int)
        stats: dict[str, float] = {}
        for optimizer in trainer.optimizers:
            kind = type(optimizer).__name__
            seen[kind] += 1
            name = f"lr-{kind}" + (f"-{seen[kind] - 1}" if seen[kind] > 1 else "")
            due = scheduled.get(id(optimizer), interval)
            if interval not in (due, "any"):
                continue
            groups = optimizer.param_groups
            for index, group in enumerate(groups):
                key = name + _group_suffix(groups, index)
                stats[key] = float(group["lr"])
                self.lrs.setdefault(key, []).append(stats[key])
                if self.log_momentum:
                    betas = "betas" in optimizer.defaults
                    stats[f"{key}-momentum"] = (
                        group["betas"][0] if betas else group.get("momentum", 0)
                    )
                if self.log_weight_decay:
                    stats[f"{key}-weight_decay"] = group["weight_decay"]
        return stats


def _group_suffix(groups: list[dict[str, Any]], index: int) -> str:
    """'' for a single unnamed group, '/<name>' for a named one, '/pg<i>' among several."""
    name = groups[index].get("name")
    if len(groups) > 1:
        return f"/{name or f'pg{index + 1}'}"
    return f"/{name}" if name else ""
