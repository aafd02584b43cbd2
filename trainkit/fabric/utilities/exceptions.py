"""``lightning.fabric.utilities.exceptions``: ``MisconfigurationException``."""

from trainkit.utilities.exceptions import MisconfigurationException

__all__ = ["MisconfigurationException"]
