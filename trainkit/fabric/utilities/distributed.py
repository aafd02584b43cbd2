"""``lightning.fabric.utilities.distributed``: whether every rank sees one folder, and torch's
``ReduceOp``."""

from torch.distributed import ReduceOp

from trainkit.utilities.cloud_io import is_shared_filesystem

__all__ = ["ReduceOp", "is_shared_filesystem"]
