"""Lightning's ``plugins.io``: the ways a checkpoint is written."""

from __future__ import annotations

from trainkit.checkpoint.async_io import AsyncCheckpointIO
from trainkit.checkpoint.checkpoint_io import CheckpointIO, TorchCheckpointIO

__all__ = ["AsyncCheckpointIO", "CheckpointIO", "TorchCheckpointIO"]
