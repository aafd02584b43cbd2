"""Lightning's ``utilities.warnings``: ``PossibleUserWarning`` and how to silence it, defined in
``trainkit/common/warnings.py``."""

from trainkit.common.warnings import PossibleUserWarning, disable_possible_user_warnings

__all__ = ["PossibleUserWarning", "disable_possible_user_warnings"]
