"""Forking DataLoader workers next to gloo's threads without deadlocking the child.

On CPython before 3.11.8 (gh-112275) a child forked while another thread creates a Python thread
state inherits a locked interpreter mutex and hangs before running a line. gloo's worker threads
create one each time they drop the last reference to a finished collective's tensors, so a rank
that forks its DataLoader workers right after a collective can hang for good (seen here: about one
2-rank run in 20 with a worker per rank). Before trainkit forks workers, the collectives it started
are settled and their threads get a moment to leave Python.
"""

from __future__ import annotations

import sys
import time
from typing import Any

AFFECTED = sys.version_info < (3, 11, 8)
DRAIN_SECONDS = 0.002  # the GIL, released this long, lets a waiting gloo thread finish its decref


def forks_workers(loader: Any) -> bool:
    """Whether iterating ``loader`` now starts worker processes (any of the loaders read
    together, for one with ``flattened``)."""
    if any(forks_workers(inner) for inner in getattr(loader, "flattened", ())):
        return True
    if getattr(loader, "num_workers", 0) <= 0:
        return False
    return not (loader.persistent_workers and getattr(loader, "_iterator", None) is not None)


def let_collective_threads_leave_python() -> None:
    """Release the GIL briefly so a gloo thread finishing a collective is out of Python (only on
    the affected interpreters, and only in a distributed run)."""
    if not AFFECTED:
        return
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        time.sleep(DRAIN_SECONDS)
