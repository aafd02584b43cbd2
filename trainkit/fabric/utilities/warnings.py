"""``lightning.fabric.utilities.warnings``: ``PossibleUserWarning`` and how to silence it."""

from trainkit.common.warnings import PossibleUserWarning, disable_possible_user_warnings
from trainkit.utilities.rank_zero import LightningDeprecationWarning

__all__ = ["LightningDeprecationWarning", "PossibleUserWarning", "disable_possible_user_warnings"]
