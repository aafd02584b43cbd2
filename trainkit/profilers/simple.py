"""``SimpleProfiler``: the wall time of every action; a table of calls, mean and total."""

from __future__ import annotations

import functools
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

from trainkit.profilers.base import Profiler


class SimpleProfiler(Profiler):
    """Total and mean wall time per hook, step or named block (``profiler: simple``)."""

    def __init__(
        self, dirpath: str | Path | None = None, filename: str | None = None, extended: bool = True
    ) -> None:
        """
        Args:
            dirpath: Folder of the report file (default: the run's log folder).
            filename: Report file name (without: the report is printed).
            extended: Add each action's share of the stage's time.
        """
        super().__init__(dirpath, filename)
        self.extended = extended
        self.durations: dict[str, list[float]] = defaultdict(list)
        self._started: dict[str, float] = {}
        self._stage_start = time.perf_counter()

    def setup(self, stage: str, local_rank: int | None = None, log_dir: str | None = None) -> None:
        super().setup(stage, local_rank, log_dir)
        self._stage_start = time.perf_counter()

    def start(self, action_name: str) -> None:
        if action_name in self._started:
            raise ValueError(f"SimpleProfiler: {action_name!r} is already being timed")
        self._started[action_name] = time.perf_counter()

    def stop(self, action_name: str) -> None:
        started = self._started.pop(action_name, None)
        if started is None:
            raise ValueError(f"SimpleProfiler: {action_name!r} was stopped without being started")
        self.durations[action_name].append(time.perf_counter() - started)

    def wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        record = self.durations[name].append
        clock = time.perf_counter

        @functools.wraps(fn)
        def timed(*args: object, **kwargs: object) -> Any:
            start = clock()
            try:
                return fn(*args, **kwargs)
            finally:
                record(clock() - start)

        return timed

    def summary(self) -> str:
        rows = sorted(self.durations.items(), key=lambda item: -sum(item[1]))
        elapsed = max(time.perf_counter() - self._stage_start, 1e-9)
        share = f" {'% of stage':>11}" if self.extended else ""
        lines = [f"{'action':<40} {'calls':>8} {'mean (ms)':>12} {'total (s)':>12}{share}"]
        for name, values in rows:
            if values:
                total = sum(values)
                line = (
                    f"{name:<40} {len(values):>8} {1e3 * total / len(values):>12.3f} {total:>12.3f}"
                )
                if self.extended:
                    line += f" {100 * total / elapsed:>11.1f}"
                lines.append(line)
        return "\n".join(lines)
