"""``PossibleUserWarning``: a warning about what is likely, not surely, a mistake."""

from __future__ import annotations

import warnings


class PossibleUserWarning(UserWarning):
    """A warning about a setting that is often a mistake (silence with
    ``disable_possible_user_warnings()``)."""


def disable_possible_user_warnings(module: str = "") -> None:
    """Ignore ``PossibleUserWarning`` from now on: all of them, or those raised in the modules
    whose name matches the regular expression ``module``."""
    warnings.filterwarnings("ignore", module=module, category=PossibleUserWarning)
