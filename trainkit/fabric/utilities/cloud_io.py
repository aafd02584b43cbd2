"""``lightning.fabric.utilities.cloud_io``: the fsspec filesystem of a path, and a checkpoint
loaded from (``_load``) or saved atomically to (``_atomic_save``) a local or remote path."""

from trainkit.utilities.cloud_io import _atomic_save, _load, get_filesystem

__all__ = ["_atomic_save", "_load", "get_filesystem"]
