"""Compiled ops built on first use (deepspeed's, through torch's extension builder): a lock a killed
build left behind is named before it can hang the run, and a build that starts is announced."""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from trainkit.errors import ConfigError

POLL_S = 0.5  # how often a running setup looks for a build that started


def extensions_root() -> Path:
    """The folder torch builds extensions in: $TORCH_EXTENSIONS_DIR, else its per-Python cache."""
    given = os.environ.get("TORCH_EXTENSIONS_DIR")
    if given:
        return Path(given)
    import torch
    from torch.utils.cpp_extension import get_default_build_root

    if torch.version.hip is not None:
        accelerator = f"rocm{torch.version.hip.replace('.', '')}"
    elif torch.version.cuda is not None:
        accelerator = f"cu{torch.version.cuda.replace('.', '')}"
    else:
        accelerator = "cpu"
    python = f"py{sys.version_info.major}{sys.version_info.minor}{getattr(sys, 'abiflags', '')}"
    return Path(get_default_build_root()) / f"{python}_{accelerator}"


def build_locks(root: Path) -> list[Path]:
    """Every op's build lock under ``root`` (``<root>/<op>/lock``)."""
    return sorted(root.glob("*/lock")) if root.is_dir() else []


def holds(fd_dir: Path, target: str) -> bool:
    """Whether the process of ``/proc/<pid>/fd`` has ``target`` open."""
    with contextlib.suppress(OSError):
        for fd in fd_dir.iterdir():
            with contextlib.suppress(OSError):
                if os.readlink(fd) == target:
                    return True
    return False


def lock_holders(lock: Path) -> list[int]:
    """Processes on this host that hold ``lock`` open (the builder keeps it open while it builds)."""
    target = os.path.realpath(lock)
    return [int(d.parent.name) for d in Path("/proc").glob("[0-9]*/fd") if holds(d, target)]


def refuse_stale_locks(root: Path) -> None:
    """A ConfigError naming a build lock no process on this host holds: its builder was killed,
    and every later build of that op would wait for it forever."""
    if not Path("/proc/self/fd").is_dir():  # no way to see holders here: leave it to torch
        return
    for lock in build_locks(root):
        if lock_holders(lock):
            continue
        with contextlib.suppress(FileNotFoundError):
            age_min = (time.time() - lock.stat().st_mtime) / 60
            raise ConfigError(
                f"the build lock of op {lock.parent.name!r}",
                str(lock),
                "none left behind (no process on this host holds it; "
                f"it was made {age_min:.0f} min ago by a build that was killed)",
                f"delete it (rm {lock}) and run again; if another host builds into the same "
                "folder right now, wait for it instead",
            )


def say(line: str) -> None:
    print(f"trainkit: {line}", file=sys.stderr, flush=True)


class BuildAnnouncer:
    """While it runs, says once per op when this process starts compiling it."""

    def __init__(self, root: Path, announce: Callable[[str], object] = say) -> None:
        self.root = root
        self.announce = announce
        self.said: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="trainkit-op-builds", daemon=True)

    def __enter__(self) -> BuildAnnouncer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _watch(self) -> None:
        while not self._stop.wait(POLL_S):
            for lock in build_locks(self.root):
                op = lock.parent.name
                if op not in self.said and holds(Path("/proc/self/fd"), os.path.realpath(lock)):
                    self.said.add(op)
                    self.announce(
                        f"compiling op {op!r} (first use on this machine: minutes on CPU; "
                        f"later runs reuse {lock.parent})"
                    )


@contextlib.contextmanager
def watched_op_builds(barrier: Callable[[], object] | None = None) -> Iterator[None]:
    """Around a call that may compile ops: a stale lock refused first (``barrier``, a callable
    every rank calls, keeps a build another rank starts from looking stale), builds announced."""
    root = extensions_root()
    refuse_stale_locks(root)
    if barrier is not None:
        barrier()
    with BuildAnnouncer(root):
        yield
