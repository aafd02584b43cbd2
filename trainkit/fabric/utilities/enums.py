"""``lightning.fabric.utilities.enums``: ``LightningEnum``."""

from trainkit.common.enums import LightningEnum

__all__ = ["LightningEnum"]
