"""Lightning's ``core``: ``LightningModule`` and ``LightningDataModule`` (trainkit's
``TrainModule`` and ``DataModule``), loaded on first use; ``core.mixins`` holds
``HyperparametersMixin``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from trainkit.common.lazy import lazy_exports

_LAZY = {
    "LightningModule": "trainkit.module",
    "LightningDataModule": "trainkit.datamodule",
}

if TYPE_CHECKING:  # what type checkers and editors see; at run time each loads on first use
    from trainkit.datamodule import LightningDataModule
    from trainkit.module import LightningModule

__all__ = ["LightningDataModule", "LightningModule"]


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, __all__)
