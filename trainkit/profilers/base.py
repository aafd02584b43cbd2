"""``Profiler``: times named actions (every hook and step the loops run, and any block a
program wraps in ``trainer.profiler.profile("name")``) and reports them when a stage ends."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


class Profiler:
    """Subclass it with ``start``, ``stop`` and ``summary``; the report goes to
    ``dirpath/<stage>-<filename>.txt`` when both are set (``dirpath`` defaults to the run's log
    folder), else to stdout."""

    enabled = True  # whether the loops wrap their calls with it

    def __init__(self, dirpath: str | Path | None = None, filename: str | None = None) -> None:
        self.dirpath = dirpath
        self.filename = filename
        self._stage: str | None = None
        self._local_rank: int | None = None

    def start(self, action_name: str) -> None:
        """Start timing ``action_name``."""
        raise NotImplementedError(f"{type(self).__name__} defines no start(action_name)")

    def stop(self, action_name: str) -> None:
        """Stop timing ``action_name``."""
        raise NotImplementedError(f"{type(self).__name__} defines no stop(action_name)")

    def summary(self) -> str:
        """The report of what was recorded."""
        return ""

    @contextmanager
    def profile(self, action_name: str) -> Iterator[str]:
        """Time the block: ``with trainer.profiler.profile("load"): ...``."""
        self.start(action_name)
        try:
            yield action_name
        finally:
            self.stop(action_name)

    def wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        """``fn`` timed as the action ``name`` at every call."""
        start, stop = self.start, self.stop

        @functools.wraps(fn)
        def profiled(*args: object, **kwargs: object) -> Any:
            start(name)
            try:
                return fn(*args, **kwargs)
            finally:
                stop(name)

        return profiled

    def setup(self, stage: str, local_rank: int | None = None, log_dir: str | None = None) -> None:
        """Called as a stage starts: its name, this process's local rank, the log folder."""
        self._stage = stage
        self._local_rank = local_rank
        self.dirpath = self.dirpath or log_dir

    def teardown(self, stage: str | None) -> None:
        """Called after the stage's report."""

    @property
    def local_rank(self) -> int:
        return self._local_rank or 0

    def report_path(self, extension: str = ".txt") -> Path | None:
        """Where ``describe`` writes: ``dirpath/<stage>-<filename>[-<local rank>]<extension>``
        (None without a dirpath and a filename: the report is printed)."""
        if not (self.dirpath and self.filename):
            return None
        parts = [part for part in (self._stage, self.filename) if part]
        if self._local_rank:
            parts.append(str(self._local_rank))
        name = re.sub(r"[\\/:*?\"<>|\s]+", "_", "-".join(parts))
        return Path(self.dirpath) / f"{name}{extension}"

    def describe(self) -> None:
        """Write the summary to the report file, or print it."""
        summary = self.summary()
        if summary:
            path = self.report_path()
            if path is None:
                print(f"\nprofile ({self._stage}):\n{summary}", flush=True)
            else:
                path.parent.mkdir(parents=True, exist_ok=True)
                with path.open("a") as report:
                    report.write(summary + "\n")
        self.teardown(self._stage)


class PassThroughProfiler(Profiler):
    """No profiling: ``wrap`` returns the callable itself, so the hot loop pays nothing."""

    enabled = False

    def start(self, action_name: str) -> None:
        """Record nothing."""

    def stop(self, action_name: str) -> None:
        """Record nothing."""

    def wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        return fn
