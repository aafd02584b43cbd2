"""EarlyStopping: stop fitting when a monitored metric stops improving."""

from __future__ import annotations

import math
from typing import Any

from trainkit.callbacks.base import Callback
from trainkit.errors import ConfigError


class EarlyStopping(Callback):
    """Stop when ``monitor`` has not improved by ``min_delta`` for ``patience`` epochs."""

    order = 10  # runs after other callbacks, once epoch metrics are reduced

    def __init__(
        self,
        monitor: str,
        patience: int = 3,
        mode: str = "min",
        min_delta: float = 0.0,
        stopping_threshold: float | None = None,
        check_finite: bool = True,
        verbose: bool = False,
    ) -> None:
        if mode not in ("min", "max"):
            raise ConfigError("EarlyStopping mode", mode, "'min' or 'max'")
        self.monitor = monitor
        self.patience = patience
        self.mode = mode
        self.min_delta = abs(min_delta)
        self.stopping_threshold = stopping_threshold
        self.check_finite = check_finite
        self.verbose = verbose
        self.wait_count = 0
        self.best_score = math.inf if mode == "min" else -math.inf
        self.stopped_epoch = 0
        self.stop_reason = ""

    def on_train_epoch_end(self, trainer: Any, module: Any) -> None:
        if trainer.sanity_checking:
            return
        metrics = trainer.callback_metrics
        if self.monitor not in metrics:
            raise KeyError(
                f"EarlyStopping(monitor={self.monitor!r}) found no such logged metric; "
                f"logged: {sorted(metrics)}"
            )
        value = metrics[self.monitor]
        current = value.item() if hasattr(value, "item") else float(value)
        reason = self._check(current)
        if reason:
            self.stopped_epoch = trainer.current_epoch
            self.stop_reason = reason
            trainer.should_stop = True
            if self.verbose and trainer.is_global_zero:
                print(f"EarlyStopping: {reason}")

    def _check(self, current: float) -> str:
        sign = 1 if self.mode == "min" else -1
        if self.check_finite and not math.isfinite(current):
            return f"{self.monitor} = {current} is not finite"
        if self.stopping_threshold is not None and sign * (current - self.stopping_threshold) <= 0:
            return f"{self.monitor} = {current:.6g} reached stopping_threshold {self.stopping_threshold}"
        if sign * (current - self.best_score) < -self.min_delta:
            self.best_score = current
            self.wait_count = 0
            return ""
        self.wait_count += 1
        if self.wait_count >= self.patience:
            return (
                f"{self.monitor} did not improve by {self.min_delta} for {self.patience} epochs; "
                f"best {self.best_score:.6g}"
            )
        return ""

    def state_dict(self) -> dict[str, Any]:
        return {
            "wait_count": self.wait_count,
            "best_score": self.best_score,
            "stopped_epoch": self.stopped_epoch,
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.wait_count = state_dict["wait_count"]
        self.best_score = state_dict["best_score"]
        self.stopped_epoch = state_dict["stopped_epoch"]
