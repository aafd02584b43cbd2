"""Host memory of sharded strategies on CPU: freed buffers go back to the operating system.

FSDP gathers each unit's full parameters every step and frees them again. glibc raises its
mmap threshold after such frees, so the next gathers come from the heap and the process keeps
them: peak RSS grows to about the unsharded model and sharding saves nothing. A fixed threshold
(as ``MALLOC_MMAP_THRESHOLD_`` would set) keeps large buffers mmapped and returned on free."""

from __future__ import annotations

import ctypes
import ctypes.util
import os

M_MMAP_THRESHOLD = -3  # mallopt parameter number in glibc's malloc.h
THRESHOLD_BYTES = 128 * 1024  # glibc's own starting value, kept fixed


def return_freed_buffers() -> bool:
    """Fix glibc's mmap threshold in this process (unless the user set it); whether it did."""
    if "MALLOC_MMAP_THRESHOLD_" in os.environ:
        return False
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        libc = ctypes.CDLL(name)
        return bool(libc.mallopt(M_MMAP_THRESHOLD, THRESHOLD_BYTES))
    except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to do
        return False
