"""Doing things on global rank 0 only: ``rank_zero_only`` (``rank_zero_only.rank`` is set at
import from RANK/LOCAL_RANK/SLURM_PROCID/JSM_NAMESPACE_RANK and again when a stage knows the
rank), and the messages built on it."""

from __future__ import annotations

from typing import Any

from lightning_utilities.core.rank_zero import (
    WarningCache,
    rank_prefixed_message,
    rank_zero_debug,
    rank_zero_warn,
)

from trainkit.distributed.comm import rank_zero_info, rank_zero_only

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


class LightningDeprecationWarning(DeprecationWarning):
    """What ``rank_zero_deprecation`` warns with."""


def rank_zero_deprecation(message: str | Warning, stacklevel: int = 5, **kwargs: Any) -> None:
    """Warn with ``LightningDeprecationWarning`` (or ``category=``) on global rank 0 only."""
    kwargs.setdefault("category", LightningDeprecationWarning)
    rank_zero_warn(message, stacklevel=stacklevel, **kwargs)
