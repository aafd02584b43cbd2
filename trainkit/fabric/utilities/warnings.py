"""``lightning.fabric.utilities.warnings``: ``PossibleUserWarning`` and how to silence it."""

from trainkit.utilities.rank_zero import LightningDeprecationWarning
from trainkit.utilities.warnings import PossibleUserWarning, disable_possible_user_warnings

__all__ = ["LightningDeprecationWarning", "PossibleUserWarning", "disable_possible_user_warnings"]
