"""``lightning.fabric.utilities.rank_zero``: doing things on global rank 0 only (the same
``rank_zero_only`` object as ``trainkit.utilities.rank_zero``'s)."""

from trainkit.utilities.rank_zero import (
    LightningDeprecationWarning,
    WarningCache,
    rank_prefixed_message,
    rank_zero_debug,
    rank_zero_deprecation,
    rank_zero_info,
    rank_zero_only,
    rank_zero_warn,
)

__all__ = [
    "LightningDeprecationWarning",
    "WarningCache",
    "rank_prefixed_message",
    "rank_zero_debug",
    "rank_zero_deprecation",
    "rank_zero_info",
    "rank_zero_only",
    "rank_zero_warn",
]
