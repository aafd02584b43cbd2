"""Runnable examples on synthetic data: nothing to download. ``BoringModel``,
``BoringDataModule`` and ``DemoModel`` (Lightning's names) load on first use."""

from __future__ import annotations

from typing import TYPE_CHECKING

from trainkit.common.lazy import lazy_exports

_LAZY = {
    "BoringModel": "trainkit.demos.boring_classes",
    "BoringDataModule": "trainkit.demos.boring_classes",
    "DemoModel": "trainkit.demos.boring_classes",
}

if TYPE_CHECKING:  # what type checkers and editors see; at run time each loads on first use
    from trainkit.demos.boring_classes import BoringDataModule, BoringModel, DemoModel

__all__ = ["BoringDataModule", "BoringModel", "DemoModel"]


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, __all__)
