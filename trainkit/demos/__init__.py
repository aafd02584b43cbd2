"""Runnable examples on synthetic data: nothing to download. ``BoringModel``,
``BoringDataModule`` and ``DemoModel`` (Lightning's names) load on first use."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_LAZY = {
    "BoringModel": "trainkit.demos.boring_classes",
    "BoringDataModule": "trainkit.demos.boring_classes",
    "DemoModel": "trainkit.demos.boring_classes",
}

if TYPE_CHECKING:  # what type checkers and editors see; at run time each loads on first use
    from trainkit.demos.boring_classes import BoringDataModule, BoringModel, DemoModel

__all__ = ["BoringDataModule", "BoringModel", "DemoModel"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'trainkit.demos' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
