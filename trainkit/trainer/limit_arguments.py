"""The Trainer's loop settings (how long and how often), checked and frozen into LoopLimits."""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from trainkit.errors import ConfigError
from trainkit.state import LoopLimits

# Lightning accepts None for these and means its default; so do we
_NONE_MEANS = {
    "min_epochs": 0,
    "min_steps": -1,
    "limit_train_batches": 1.0,
    "limit_val_batches": 1.0,
    "limit_test_batches": 1.0,
    "limit_predict_batches": 1.0,
    "val_check_interval": 1.0,
    "num_sanity_val_steps": 2,
    "gradient_clip_algorithm": "norm",
    "log_every_n_steps": 50,
}


def loop_limits(**settings: Any) -> LoopLimits:
    """The Trainer's loop settings, checked (``ConfigError`` names a bad one) and frozen."""
    for name, default in _NONE_MEANS.items():
        if settings.get(name, default) is None:
            settings[name] = default
    check_loop_settings(
        **{k: v for k, v in settings.items() if not k.startswith(("limit_", "overfit_"))}
    )
    max_epochs, max_steps = settings["max_epochs"], settings["max_steps"]
    if max_epochs == -1:
        max_epochs = math.inf
    if max_epochs is None:
        max_epochs = 1000 if max_steps < 0 else math.inf
    overfit = settings.get("overfit_batches", 0)
    if overfit:  # the same first batches for training and validation
        _check_fraction_or_count("overfit_batches", overfit)
        settings.update(limit_train_batches=overfit, limit_val_batches=overfit)
    return LoopLimits(**{**settings, "max_epochs": max_epochs})


def fast_dev_limits(limits: LoopLimits, count: int) -> LoopLimits:
    """``limits`` of a run that goes through ``count`` batches of each loop once (0: as is)."""
    if not count:
        return limits
    return dataclasses.replace(
        limits,
        max_epochs=1,
        max_steps=count,
        num_sanity_val_steps=0,
        limit_train_batches=count,
        limit_val_batches=count,
        limit_test_batches=count,
        limit_predict_batches=count,
        val_check_interval=1.0,
    )


def _check_fraction_or_count(name: str, value: object) -> None:
    if isinstance(value, bool) or not (
        (isinstance(value, int) and value >= 0) or (isinstance(value, float) and 0 <= value <= 1)
    ):
        raise ConfigError(f"trainer.{name}", value, "a float in [0, 1] or an int >= 0")


def check_loop_settings(
    *,
    accumulate_grad_batches: int,
    max_epochs: int | None,
    max_steps: int,
    min_epochs: int,
    min_steps: int = -1,
    reload_dataloaders_every_n_epochs: int = 0,
    num_sanity_val_steps: int,
    gradient_clip_val: float | None,
    gradient_clip_algorithm: str,
    log_every_n_steps: int,
    check_val_every_n_epoch: int | None,
    val_check_interval: int | float,
) -> None:
    """Every loop setting in range, or a ConfigError naming it (exit 2 from the CLI)."""
    _check_positive("accumulate_grad_batches", accumulate_grad_batches)
    _check_at_least("max_epochs", max_epochs, -1, "None or -1 (no limit)", none_ok=True)
    _check_at_least("max_steps", max_steps, -1, "-1 (no limit)")
    _check_at_least("min_epochs", min_epochs, 0)
    _check_at_least("min_steps", min_steps, -1, "None")
    _check_at_least("reload_dataloaders_every_n_epochs", reload_dataloaders_every_n_epochs, 0)
    _check_at_least("num_sanity_val_steps", num_sanity_val_steps, -1, "-1 (all)")
    if gradient_clip_val is not None and not gradient_clip_val >= 0:
        raise ConfigError(
            "trainer.gradient_clip_val",
            gradient_clip_val,
            "a number >= 0 or null (no clipping)",
        )
    _check_positive("log_every_n_steps", log_every_n_steps)
    if check_val_every_n_epoch is not None:
        _check_positive("check_val_every_n_epoch", check_val_every_n_epoch)
    elif not isinstance(val_check_interval, int):
        raise ConfigError(
            "trainer.val_check_interval",
            val_check_interval,
            "an int (training batches) when check_val_every_n_epoch is None",
        )
    if gradient_clip_algorithm not in ("norm", "value"):
        raise ConfigError(
            "trainer.gradient_clip_algorithm", gradient_clip_algorithm, "'norm' or 'value'"
        )
    if (
        isinstance(val_check_interval, bool)
        or val_check_interval <= 0
        or (isinstance(val_check_interval, float) and val_check_interval > 1)
    ):
        raise ConfigError(
            "trainer.val_check_interval", val_check_interval, "a float in (0, 1] or an int >= 1"
        )


def _check_at_least(
    name: str, value: object, low: int, also: str = "", none_ok: bool = False
) -> None:
    if value is None and none_ok:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        expected = f"an int >= {max(low, 0)}" + (f" or {also}" if also else "")
        raise ConfigError(f"trainer.{name}", value, expected)


def _check_positive(name: str, value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"trainer.{name}", value, "an int >= 1")
