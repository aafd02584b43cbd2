"""Lightning's tuner: ``from trainkit.tuner import Tuner``; ``Tuner(trainer).lr_find(model)``
and ``.scale_batch_size(model)`` (the Tuner loads on first use, so importing this is cheap)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

_LAZY = {
    "Tuner": "trainkit.tuner.tuning",
    "LRFinder": "trainkit.tuner.lr_finder",
}

if TYPE_CHECKING:  # what type checkers and editors see; at run time each loads on first use
    from trainkit.tuner.lr_finder import LRFinder
    from trainkit.tuner.tuning import Tuner

__all__ = ["LRFinder", "Tuner"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'trainkit.tuner' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
