"""Lightning's exception names: ``MisconfigurationException`` is trainkit's
``MisconfigurationError``, so ``except MisconfigurationException`` catches what trainkit raises
for user code that cannot work as written."""

from __future__ import annotations

from trainkit.errors import MisconfigurationError as MisconfigurationException

__all__ = ["MisconfigurationException"]
