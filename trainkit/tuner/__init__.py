"""Lightning's tuner: ``from trainkit.tuner import Tuner``; ``Tuner(trainer).lr_find(model)``
and ``.scale_batch_size(model)`` (the Tuner loads on first use, so importing this is cheap)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from trainkit.common.lazy import lazy_exports

_LAZY = {
    "Tuner": "trainkit.tuner.tuning",
    "LRFinder": "trainkit.tuner.lr_range_test",
}

if TYPE_CHECKING:  # what type checkers and editors see; at run time each loads on first use
    from trainkit.tuner.lr_range_test import LRFinder
    from trainkit.tuner.tuning import Tuner

__all__ = ["LRFinder", "Tuner"]


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, __all__)
