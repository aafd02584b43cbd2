"""Callbacks, with Lightning's names and arguments; import them from here (each loads on first
use, so importing this package is cheap)."""

from __future__ import annotations

import importlib
from typing import Any

from trainkit.callbacks.base import Callback, Checkpoint

_LAZY = {
    "ModelCheckpoint": "trainkit.callbacks.checkpoint",
    "OnExceptionCheckpoint": "trainkit.callbacks.on_exception_checkpoint",
    "EarlyStopping": "trainkit.callbacks.early_stopping",
    "EarlyStoppingReason": "trainkit.callbacks.early_stopping",
    "LearningRateMonitor": "trainkit.callbacks.lr_monitor",
    "ProgressBar": "trainkit.callbacks.progress",
    "RichProgressBar": "trainkit.callbacks.rich_progress",
    "RichProgressBarTheme": "trainkit.callbacks.rich_bars",
    "TQDMProgressBar": "trainkit.callbacks.tqdm_progress",
    "ModelSummary": "trainkit.callbacks.model_summary",
    "RichModelSummary": "trainkit.callbacks.rich_model_summary",
    "BaseFinetuning": "trainkit.callbacks.finetuning",
    "BackboneFinetuning": "trainkit.callbacks.finetuning",
    "StochasticWeightAveraging": "trainkit.callbacks.stochastic_weight_avg",
    "GradientAccumulationScheduler": "trainkit.callbacks.gradient_accumulation_scheduler",
    "Timer": "trainkit.callbacks.timer",
}

__all__ = ["Callback", "Checkpoint", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'trainkit.callbacks' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)


def import_all() -> None:
    """Load every callback class, so a config can name one by its short class name
    (``class_path: RichProgressBar``): jsonargparse resolves short names among loaded classes."""
    for module in sorted(set(_LAZY.values())):
        importlib.import_module(module)
