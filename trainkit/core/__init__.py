"""Lightning's ``core``: ``LightningModule`` and ``LightningDataModule`` (trainkit's
``TrainModule`` and ``DataModule``), loaded on first use; ``core.mixins`` holds
``HyperparametersMixin``."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_LAZY = {
    "LightningModule": "trainkit.module",
    "LightningDataModule": "trainkit.datamodule",
}

if TYPE_CHECKING:  # what type checkers and editors see; at run time each loads on first use
    from trainkit.datamodule import LightningDataModule
    from trainkit.module import LightningModule

__all__ = ["LightningDataModule", "LightningModule"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'trainkit.core' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
