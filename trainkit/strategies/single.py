"""SingleDeviceStrategy: one process on one device (CPU or one GPU)."""

from __future__ import annotations

from trainkit.strategies.base import Strategy


class SingleDeviceStrategy(Strategy):
    """Train in this process on one device; no process group, no wrapper."""

    name = "single"
