"""Profiler: ``profiler: simple`` times every hook and step and prints a table at the end."""

from __future__ import annotations

import functools
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from trainkit.errors import ConfigError


class PassThroughProfiler:
    """No profiling: ``wrap`` returns the callable itself, so the hot loop pays nothing."""

    enabled = False

    def wrap(self, name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        return fn

    def summary(self) -> str:
        return ""


class SimpleProfiler(PassThroughProfiler):
    """Total and mean wall time per hook/step name."""

    enabled = True

    def __init__(self) -> None:
        self.durations: dict[str, list[float]] = defaultdict(list)

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
        lines = [f"{'action':<40} {'calls':>8} {'mean (ms)':>12} {'total (s)':>12}"]
        for name, values in rows:
            if values:
                total = sum(values)
                lines.append(
                    f"{name:<40} {len(values):>8} {1e3 * total / len(values):>12.3f} {total:>12.3f}"
                )
        return "\n".join(lines)


def build_profiler(profiler: str | None) -> PassThroughProfiler:
    if profiler in (None, "", "none"):
        return PassThroughProfiler()
    if profiler == "simple":
        return SimpleProfiler()
    raise ConfigError("trainer.profiler", profiler, "null or 'simple'")
