"""Starting to iterate a DataLoader safely while collectives may be in flight."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from trainkit.distributed.fork_safety import forks_workers, let_collective_threads_leave_python


def start_iterating(loader: Any, preemption: Any = None) -> Iterator[Any]:
    """``iter(loader)``; when that forks workers, the agreement round of ``preemption`` (if any)
    settles first and collective threads leave Python (see fork_safety)."""
    if forks_workers(loader):
        if preemption is not None:
            preemption.settle()
        let_collective_threads_leave_python()
    return iter(loader)
