"""Real filesystems for the tests of a checkpoint folder that refuses a write: a small tmpfs that
fills up, and a folder bind-mounted onto itself that a test turns read-only mid-run. Mounting
needs root: elsewhere the tests skip, saying so."""

from __future__ import annotations

import contextlib
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest


def _mount(*arguments: str) -> subprocess.CompletedProcess:
    return subprocess.run(["mount", *arguments], capture_output=True, text=True)


@contextlib.contextmanager
def mounted(folder: Path, *arguments: str) -> Iterator[Path]:
    """``mount ARGUMENTS folder`` for the block (skips the test when it cannot mount)."""
    folder.mkdir(parents=True, exist_ok=True)
    done = _mount(*arguments, str(folder))
    if done.returncode != 0:
        pytest.skip(f"cannot mount here (needs root): {done.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "--lazy", str(folder)], check=False)


def small_disk(folder: Path, size: str) -> contextlib.AbstractContextManager[Path]:
    """A tmpfs of ``size`` (``2600k``) at ``folder``."""
    return mounted(folder, "-t", "tmpfs", "-o", f"size={size}", "tmpfs")


def bound_to_itself(folder: Path) -> contextlib.AbstractContextManager[Path]:
    """``folder`` bind-mounted onto itself, so that ``make_read_only`` can flip it alone."""
    folder.mkdir(parents=True, exist_ok=True)
    return mounted(folder, "--bind", str(folder))


def make_read_only(folder: Path, timeout: float = 60.0) -> None:
    """Remount the bind mount at ``folder`` read-only. The kernel refuses while a file there is
    open for writing (a checkpoint being written): try again until it is not."""
    deadline = time.monotonic() + timeout
    while True:
        done = _mount("-o", "remount,bind,ro", str(folder))
        if done.returncode == 0:
            return
        assert time.monotonic() < deadline, f"could not make {folder} read-only: {done.stderr}"
        time.sleep(0.01)
