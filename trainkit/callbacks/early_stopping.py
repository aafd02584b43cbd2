"""EarlyStopping: stop fitting when a monitored metric stops improving."""

from __future__ import annotations

import warnings
from enum import Enum
from typing import TYPE_CHECKING, Any

import torch

from trainkit.callbacks.base import Callback
from trainkit.errors import ConfigError, MisconfigurationError
from trainkit.metrics import closest_key_hint

if TYPE_CHECKING:
    from trainkit.module import TrainModule
    from trainkit.trainer.trainer import Trainer


class EarlyStoppingReason(Enum):
    """Why EarlyStopping stopped the fit (``EarlyStopping.stopping_reason``)."""

    NOT_STOPPED = 0
    STOPPING_THRESHOLD = 1
    DIVERGENCE_THRESHOLD = 2
    PATIENCE_EXHAUSTED = 3
    NON_FINITE_METRIC = 4


class MonitorNotFoundError(MisconfigurationError, KeyError, RuntimeError):
    """A monitored metric was never logged (a RuntimeError, as in Lightning, and a KeyError; a
    MisconfigurationError, so the CLI says it in one line)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


_ORDER = {"min": "<", "max": ">"}


class EarlyStopping(Callback):
    """Stop when ``monitor`` has not improved by more than ``min_delta`` for ``patience`` checks."""

    order = 10  # runs after other callbacks, once epoch metrics are reduced

    def __init__(
        self,
        monitor: str,
        min_delta: float = 0.0,
        patience: int = 3,
        verbose: bool = False,
        mode: str = "min",
        strict: bool = True,
        check_finite: bool = True,
        stopping_threshold: float | None = None,
        divergence_threshold: float | None = None,
        check_on_train_epoch_end: bool | None = None,
        log_rank_zero_only: bool = False,
    ) -> None:
        """
        Args:
            monitor: Logged metric to watch, e.g. 'val_loss'.
            min_delta: A change of at most this much does not count as an improvement.
            patience: Checks without improvement before stopping (one check per validation).
            verbose: Print why training stops (and each improvement).
            mode: 'min' or 'max': which way the monitored metric improves.
            strict: Raise when the metric was never logged (False: warn and skip the check).
            check_finite: Stop when the metric becomes NaN or infinite.
            stopping_threshold: Stop at once when the metric is better than this.
            divergence_threshold: Stop at once when the metric is worse than this.
            check_on_train_epoch_end: Check at the end of the training epoch (True) or after each
                validation (False); None: at epoch end when validation runs once per epoch.
            log_rank_zero_only: Print the messages on global rank 0 only.
        """
        if mode not in _ORDER:
            raise ConfigError("EarlyStopping mode", mode, "'min' or 'max'")
        self.monitor = monitor
        self.min_delta = abs(min_delta)
        self.patience = patience
        self.verbose = verbose
        self.mode = mode
        self.strict = strict
        self.check_finite = check_finite
        self.stopping_threshold = stopping_threshold
        self.divergence_threshold = divergence_threshold
        self.log_rank_zero_only = log_rank_zero_only
        self._check_on_train_epoch_end = check_on_train_epoch_end
        self.wait_count = 0
        self.stopped_epoch = 0
        self.best_score = torch.tensor(torch.inf if mode == "min" else -torch.inf)
        self.stopping_reason = EarlyStoppingReason.NOT_STOPPED
        self.stopping_reason_message: str | None = None

    @property
    def stop_reason(self) -> str:
        """The reason's name and message once stopped ('' until then)."""
        if self.stopping_reason is EarlyStoppingReason.NOT_STOPPED:
            return ""
        return f"{self.stopping_reason.name.lower()}: {self.stopping_reason_message}"

    def setup(self, trainer: Trainer, module: TrainModule, stage: str) -> None:
        if self._check_on_train_epoch_end is None:
            self._check_on_train_epoch_end = (
                trainer.val_check_interval == 1.0 and trainer.check_val_every_n_epoch == 1
            )

    def on_train_epoch_end(self, trainer: Trainer, module: TrainModule) -> None:
        if self._check_on_train_epoch_end and not trainer.sanity_checking:
            self._run_check(trainer)

    def on_validation_end(self, trainer: Trainer, module: TrainModule) -> None:
        if self._check_on_train_epoch_end or trainer.sanity_checking or trainer.state.fn != "fit":
            return
        self._run_check(trainer)

    def _run_check(self, trainer: Trainer) -> None:
        if trainer.fast_dev_run:
            return
        metrics = trainer.callback_metrics
        if self.monitor not in metrics:
            message = (
                f"Early stopping conditioned on metric `{self.monitor}` which is not available. "
                "Pass in or modify your `EarlyStopping` callback to use any of the following: "
                f"`{'`, `'.join(metrics)}`{closest_key_hint(self.monitor, metrics)}"
            )
            if self.strict:
                raise MonitorNotFoundError(message)
            if self.verbose:
                warnings.warn(message, RuntimeWarning, stacklevel=2)
            return
        current = torch.as_tensor(metrics[self.monitor]).detach().squeeze().cpu()
        reason, message = self._evaluate(current)
        should_stop = reason is not EarlyStoppingReason.NOT_STOPPED
        if trainer.world_size > 1:  # any rank may ask to stop
            should_stop = any(trainer.strategy.all_gather_object(should_stop))
        if should_stop:
            self.stopped_epoch = trainer.current_epoch
            trainer.should_stop = True
        if reason is not EarlyStoppingReason.NOT_STOPPED:
            self.stopping_reason, self.stopping_reason_message = reason, message
        if message and self.verbose:
            self._log(trainer, message)

    def _evaluate(self, current: torch.Tensor) -> tuple[EarlyStoppingReason, str | None]:
        """Lightning's order of checks: finite, stopping threshold, divergence, improvement."""
        better = self._better
        sign = _ORDER[self.mode]
        if self.check_finite and not torch.isfinite(current):
            return EarlyStoppingReason.NON_FINITE_METRIC, (
                f"Monitored metric {self.monitor} = {current} is not finite. "
                f"Previous best value was {self.best_score:.3f}. Signaling Trainer to stop."
            )
        if self.stopping_threshold is not None and better(current, self.stopping_threshold):
            return EarlyStoppingReason.STOPPING_THRESHOLD, (
                f"Stopping threshold reached: {self.monitor} = {current} {sign} "
                f"{self.stopping_threshold}. Signaling Trainer to stop."
            )
        if self.divergence_threshold is not None and better(-current, -self.divergence_threshold):
            return EarlyStoppingReason.DIVERGENCE_THRESHOLD, (
                f"Divergence threshold reached: {self.monitor} = {current} {sign} "
                f"{self.divergence_threshold}. Signaling Trainer to stop."
            )
        shifted = current + self.min_delta if self.mode == "min" else current - self.min_delta
        if better(shifted, self.best_score):
            message = self._improvement_message(current)
            self.best_score, self.wait_count = current.float(), 0
            return EarlyStoppingReason.NOT_STOPPED, message
        self.wait_count += 1
        if self.wait_count >= self.patience:
            return EarlyStoppingReason.PATIENCE_EXHAUSTED, (
                f"Monitored metric {self.monitor} did not improve in the last {self.wait_count} "
                f"records. Best score: {self.best_score:.3f}. Signaling Trainer to stop."
            )
        return EarlyStoppingReason.NOT_STOPPED, None

    def _better(self, a: torch.Tensor, b: torch.Tensor | float) -> bool:
        return bool(a < b if self.mode == "min" else a > b)

    def _improvement_message(self, current: torch.Tensor) -> str:
        if torch.isfinite(self.best_score):
            return (
                f"Metric {self.monitor} improved by {abs(self.best_score - current):.3f} >= "
                f"min_delta = {self.min_delta}. New best score: {current:.3f}"
            )
        return f"Metric {self.monitor} improved. New best score: {current:.3f}"

    def _log(self, trainer: Trainer, message: str) -> None:
        rank = trainer.global_rank
        if self.log_rank_zero_only and rank != 0:
            return
        print(f"[rank: {rank}] {message}" if trainer.world_size > 1 else message, flush=True)

    def state_dict(self) -> dict[str, Any]:
        return {
            "wait_count": self.wait_count,
            "stopped_epoch": self.stopped_epoch,
            "best_score": self.best_score,
            "patience": self.patience,
            "stopping_reason": self.stopping_reason.value,
            "stopping_reason_message": self.stopping_reason_message,
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.wait_count = state_dict["wait_count"]
        self.stopped_epoch = state_dict["stopped_epoch"]
        self.best_score = torch.as_tensor(state_dict["best_score"])
        self.patience = state_dict.get("patience", self.patience)
        self.stopping_reason = EarlyStoppingReason(state_dict.get("stopping_reason", 0))
        self.stopping_reason_message = state_dict.get("stopping_reason_message")
