"""A process id that names no process, found without starting one."""

from __future__ import annotations

import os
from pathlib import Path


def pid_of_no_process() -> int:
    """The highest free pid below the kernel's limit (a pid that exists is skipped)."""
    limit = int(Path("/proc/sys/kernel/pid_max").read_text())
    for pid in range(limit - 1, 1, -1):
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return pid
        except PermissionError:  # another user's process
            continue
    raise RuntimeError("every pid is in use")
