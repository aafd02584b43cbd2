"""``lightning.fabric.utilities.enums``: ``LightningEnum``."""

from trainkit.utilities.enums import LightningEnum

__all__ = ["LightningEnum"]
