"""Python's cycle collector while a run starts: rarer passes over the objects imports make."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

#: a pass every 50,000 net allocations (Python's default: 700), the older generations after 20
STARTUP_THRESHOLDS = (50_000, 20, 20)


@contextlib.contextmanager
def rare_collections() -> Iterator[None]:
    """Run the block with the cycle collector passing rarely. Importing torch, and torch._dynamo
    (which DDP and every optimizer import), makes hundreds of thousands of objects that live as
    long as the process; at the default schedule the collector walks them again and again, a
    fifth of a rank's start-up. Cycles the block leaves are still collected, only later. A
    schedule already this rare (the user's own, or an enclosing block's), or none (threshold
    0: automatic collection off), is left as it is."""
    before = gc.get_threshold()
    if before[0] == 0 or before[0] >= STARTUP_THRESHOLDS[0]:
        yield
        return
    gc.set_threshold(*STARTUP_THRESHOLDS)
    try:
        yield
    finally:
        gc.set_threshold(*before)
