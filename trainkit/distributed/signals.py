"""The launcher <-> rank contract: exit codes, stop signals, env-var names, and the ranks' stop
signal handlers. A leaf: it imports nothing of trainkit."""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import threading
import time
from collections.abc import Iterator
from types import FrameType
from typing import Any

PREEMPTED_EXIT_CODE = 75  # sysexits.h EX_TEMPFAIL: the ranks saved their state; run again to resume
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1)
SAME_NOTICE_SECONDS = 1.0  # the copy a launcher forwards, or a scheduler's signal to every process

ERROR_FILE_ENV = "TRAINKIT_ERROR_FILE"  # where a launched rank writes its uncaught exception
ABORT_FILE_ENV = "TRAINKIT_ABORT_FILE"  # exists once the launcher tears a failed job down
BOARD_ENV = "TRAINKIT_RANK_BOARD"  # the shared-memory file each rank marks its phase in
STOP_GRACE_ENV = "TRAINKIT_STOP_GRACE"  # seconds ranks get to save and exit after a stop signal
DEFAULT_STOP_GRACE = 120.0
# a launched rank creates this file once its stop's checkpoint is saved: from then on the launcher
# lets a repeated stop signal pass instead of killing the ranks
SAVED_FILE_ENV = "TRAINKIT_SAVED_FILE"
RESTART_ENV = "TRAINKIT_RESTART_COUNT"  # set by trainkit's launcher in restarted ranks (1, 2, ...)
# set by trainkit's launchers (re-executing and spawning) in every rank they start: a rank of
# trainkit is recognised by this, never by LOCAL_RANK/WORLD_SIZE a shell may still hold
LAUNCHED_ENV = "TRAINKIT_LAUNCHED"


class StopSignals:
    """Signal handlers: the first stop signal is recorded; one arriving a second or more later
    ends the process at once, unless the checkpoint is already saved (then the exit with 75 is
    under way and nothing is lost by letting it finish); any, once the launcher is tearing a
    failed job down, ends it too."""

    def __init__(self) -> None:
        self.received: int | None = None
        self.received_at = 0.0
        self._saved = False
        self.noted = False  # said that a stop signal after the save changes nothing
        self._previous: dict[int, Any] = {}
        self._holder: StopSignals | None = None  # the one this took over from, given back

    @property
    def saved(self) -> bool:
        """Whether the stop's checkpoint is written (or being written): keep going to the exit."""
        return self._saved

    @saved.setter
    def saved(self, value: bool) -> None:
        if value and not self._saved:
            tell_launcher_saved()
        self._saved = value

    def install(self) -> bool:
        """Catch the stop signals (only possible in the main thread); returns whether it did.
        A holder holding signals since start-up (``hold_stop_signals``) hands over what it got;
        ``uninstall`` gives it back what happened since (the held signal, whether the stop's
        checkpoint is saved), so it goes on holding until its own block ends."""
        if threading.current_thread() is not threading.main_thread():
            return False
        for signum in STOP_SIGNALS:
            previous = signal.signal(signum, self._handle)
            holder = getattr(previous, "__self__", None)
            if isinstance(holder, StopSignals):
                if holder.received is not None and self.received is None:
                    self.received, self.received_at = holder.received, holder.received_at
                self._holder = holder
            self._previous[signum] = previous
        return True

    def uninstall(self) -> None:
        holder = self._holder
        if holder is not None:  # back to holding, knowing what this one saw (before it handles)
            holder.received, holder.received_at = self.received, self.received_at
            holder.saved, holder.noted = self.saved, self.noted
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous.clear()

    def is_installed(self) -> bool:
        """Whether this object still handles every stop signal."""
        return all(signal.getsignal(signum) == self._handle for signum in STOP_SIGNALS)

    def _handle(self, signum: int, frame: FrameType | None) -> None:
        abort_file = os.environ.get(ABORT_FILE_ENV)
        if abort_file and os.path.exists(abort_file):
            exit_on_signal(signum, "the launcher is stopping the job after a failure")
        if self.saved:  # the exit with 75 is under way: let it finish
            self._note_saved(signum)
            return
        now = time.monotonic()
        if self.received is None:
            self.received, self.received_at = signum, now
            return
        if now - self.received_at >= SAME_NOTICE_SECONDS:
            exit_on_signal(signum, "second stop signal")

    def _note_saved(self, signum: int) -> None:
        """Say once that a stop signal after the save changes nothing (under trainkit's
        launcher, the launcher says it for every rank)."""
        if self.noted or os.environ.get(SAVED_FILE_ENV):
            return
        self.noted = True
        first = signal.Signals(self.received).name if self.received is not None else ""
        when = "again" if signum == self.received else f"after {first or 'a peer rank stopped'}"
        say_from_handler(
            f"trainkit: {signal.Signals(signum).name} {when}; the checkpoint is saved, "
            "finishing the exit (75)"
        )


def tell_launcher_saved() -> None:
    """In a rank of trainkit's launcher: leave the mark that this rank's stop is saved."""
    path = os.environ.get(SAVED_FILE_ENV)
    if path:
        with contextlib.suppress(OSError), open(path, "a"):
            pass


def ignore_stop_signals() -> None:
    """Ignore every stop signal from now until the process ends (main thread only): for a
    process that exits 75 next, once the stop's checkpoint is saved, so that a scheduler
    repeating its SIGTERM cannot turn that exit into 143. Ignored, not handled: the interpreter
    puts the default action back for Python handlers while it shuts down."""
    if threading.current_thread() is threading.main_thread():
        for signum in STOP_SIGNALS:
            signal.signal(signum, signal.SIG_IGN)


def say_from_handler(line: str) -> None:
    """Write one line to stderr from a signal handler: straight to the file descriptor, since
    a handler may run inside a write to the buffered stream (which raises on a reentrant call)."""
    try:
        fd = sys.stderr.fileno()
    except (AttributeError, OSError, ValueError):
        fd = 2
    with contextlib.suppress(OSError):
        os.write(fd, f"{line}\n".encode())


def installed_stop_signals() -> StopSignals | None:
    """The StopSignals handling the stop signals right now (holding or watching), if any."""
    handler = signal.getsignal(signal.SIGTERM)
    holder = getattr(handler, "__self__", None)
    return holder if isinstance(holder, StopSignals) and holder.is_installed() else None


def held_stop_signal() -> int | None:
    """The stop signal held since start-up and not yet acted on, if one arrived."""
    holder = installed_stop_signals()
    return holder.received if holder is not None else None


def hold_stop_signals_now() -> StopSignals | None:
    """Keep a stop signal that arrives before fit watches for them (start-up, rendezvous, data
    setup) instead of dying: the fit loop takes it over, saves at its first safe point and exits
    75. Returns the new holder (None when one is already installed or off the main thread)."""
    if threading.current_thread() is not threading.main_thread() or installed_stop_signals():
        return None
    holder = StopSignals()
    holder.install()
    return holder


@contextlib.contextmanager
def hold_stop_signals(until_exit: bool = False) -> Iterator[None]:
    """``hold_stop_signals_now`` for a block; released after it unless fit took over.
    ``until_exit``, for a process that ends right after the block (the ``trainkit`` command):
    when the stop's checkpoint was saved in it, stop signals stay ignored until the exit."""
    holder = hold_stop_signals_now()
    try:
        yield
    finally:
        if holder is not None and holder.is_installed():
            if until_exit and holder.saved:
                ignore_stop_signals()
            else:
                holder.uninstall()


def exit_on_signal(signum: int, why: str) -> None:
    """Leave at once with 128 + signum, saying why and that no checkpoint was written."""
    name = signal.Signals(signum).name
    with contextlib.suppress(RuntimeError, OSError, ValueError):  # what was printed before
        sys.stderr.flush()
    say_from_handler(f"trainkit: {name} ({why}): exiting without a checkpoint")
    os._exit(128 + signum)


def die_with_parent() -> None:
    """Linux: SIGKILL this process when its parent dies (a rank when the launcher does, a data
    loader worker when its rank does), so nothing is ever orphaned."""
    with contextlib.suppress(OSError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
