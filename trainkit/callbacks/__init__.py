"""Callbacks: checkpointing, early stopping, LR monitoring, progress; import them from here."""

from __future__ import annotations

import importlib
from typing import Any

from trainkit.callbacks.base import Callback

_LAZY = {
    "ModelCheckpoint": "trainkit.callbacks.checkpoint",
    "EarlyStopping": "trainkit.callbacks.early_stopping",
    "LearningRateMonitor": "trainkit.callbacks.lr_monitor",
    "ProgressBar": "trainkit.callbacks.progress",
}

__all__ = ["Callback", *_LAZY]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'trainkit.callbacks' has no attribute {name!r}")
