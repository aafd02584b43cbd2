"""Profilers (Lightning's ``profilers``): ``Trainer(profiler="simple" | "advanced" |
"pytorch")`` or a profiler object; a program times its own blocks with
``trainer.profiler.profile("name")``."""

from __future__ import annotations

from trainkit.errors import ConfigError
from trainkit.profilers.advanced import AdvancedProfiler
from trainkit.profilers.base import PassThroughProfiler, Profiler
from trainkit.profilers.pytorch import PyTorchProfiler
from trainkit.profilers.simple import SimpleProfiler

__all__ = [
    "AdvancedProfiler",
    "PassThroughProfiler",
    "Profiler",
    "PyTorchProfiler",
    "SimpleProfiler",
    "build_profiler",
]

PROFILERS: dict[str, type[Profiler]] = {
    "simple": SimpleProfiler,
    "advanced": AdvancedProfiler,
    "pytorch": PyTorchProfiler,
}


def build_profiler(profiler: str | Profiler | None) -> Profiler:
    """The Trainer's ``profiler`` setting as a profiler (None: one that records nothing)."""
    if isinstance(profiler, Profiler):
        return profiler
    if profiler in (None, "", "none"):
        return PassThroughProfiler()
    if isinstance(profiler, str) and profiler.lower() in PROFILERS:
        return PROFILERS[profiler.lower()]()
    raise ConfigError(
        "trainer.profiler", profiler, f"null, {', '.join(map(repr, PROFILERS))} or a Profiler"
    )
