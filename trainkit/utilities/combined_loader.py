"""Lightning's ``utilities.combined_loader``: ``CombinedLoader``, defined in
``trainkit/combined_loader.py``."""

from trainkit.combined_loader import MODES, CombinedBatches, CombinedLoader, Mode, sized_len

__all__ = ["MODES", "CombinedBatches", "CombinedLoader", "Mode", "sized_len"]
