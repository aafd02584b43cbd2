"""``AdvancedProfiler``: cProfile per action, so the report shows the functions each hook and
step spent its time in."""

from __future__ import annotations

import cProfile
import io
import pstats
from pathlib import Path

from trainkit.profilers.base import Profiler


class AdvancedProfiler(Profiler):
    """Function-level statistics (cProfile) for every action (``profiler: advanced``)."""

    def __init__(
        self,
        dirpath: str | Path | None = None,
        filename: str | None = None,
        line_count_restriction: float = 1.0,
        dump_stats: bool = False,
    ) -> None:
        """
        Args:
            dirpath: Folder of the report file (default: the run's log folder).
            filename: Report file name (without: the report is printed).
            line_count_restriction: Rows per action: an int count or a fraction of them.
            dump_stats: Also write each action's raw statistics to ``dirpath`` (``.prof``).
        """
        super().__init__(dirpath, filename)
        self.line_count_restriction = line_count_restriction
        self.dump_stats = dump_stats
        self.profiled_actions: dict[str, cProfile.Profile] = {}

    def start(self, action_name: str) -> None:
        self.profiled_actions.setdefault(action_name, cProfile.Profile()).enable()

    def stop(self, action_name: str) -> None:
        profile = self.profiled_actions.get(action_name)
        if profile is None:
            raise ValueError(f"AdvancedProfiler: {action_name!r} was stopped without being started")
        profile.disable()

    def summary(self) -> str:
        parts = []
        for action, profile in self.profiled_actions.items():
            text = io.StringIO()
            stats = pstats.Stats(profile, stream=text).strip_dirs().sort_stats("cumulative")
            stats.print_stats(self.line_count_restriction)
            parts.append(f"Profile stats for: {action}\n{text.getvalue()}")
        return "\n".join(parts)

    def teardown(self, stage: str | None) -> None:
        if self.dump_stats and self.dirpath:
            folder = Path(self.dirpath)
            folder.mkdir(parents=True, exist_ok=True)
            for action, profile in self.profiled_actions.items():
                profile.dump_stats(folder / f"{stage or 'run'}-{action}.prof")
        self.profiled_actions = {}
