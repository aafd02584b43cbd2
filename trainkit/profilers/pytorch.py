"""``PyTorchProfiler``: ``torch.profiler`` over the stage, each action a labelled range; the
report is torch's operator table, and a Chrome trace can be written."""

from __future__ import annotations

from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import torch

from trainkit.profilers.base import Profiler


class PyTorchProfiler(Profiler):
    """torch.profiler's operator statistics per stage (``profiler: pytorch``)."""

    def __init__(
        self,
        dirpath: str | Path | None = None,
        filename: str | None = None,
        group_by_input_shapes: bool = False,
        export_to_chrome: bool = True,
        row_limit: int = 20,
        sort_by_key: str | None = None,
        table_kwargs: dict[str, Any] | None = None,
        **profiler_kwargs: Any,
    ) -> None:
        """
        Args:
            dirpath: Folder of the report and trace (default: the run's log folder).
            filename: Report file name (without: the report is printed).
            group_by_input_shapes: One table row per operator and input shape.
            export_to_chrome: Write a Chrome trace (``chrome://tracing``) to dirpath.
            row_limit: Rows of the table (-1: all).
            sort_by_key: The table's sort column (default: CUDA time with a GPU, else CPU time).
            table_kwargs: More arguments of ``key_averages().table``.
            profiler_kwargs: Arguments of ``torch.profiler.profile`` (activities, schedule...).
        """
        super().__init__(dirpath, filename)
        self.group_by_input_shapes = group_by_input_shapes
        self.export_to_chrome = export_to_chrome
        self.row_limit = row_limit
        self.sort_by_key = sort_by_key or (
            "cuda_time_total" if torch.cuda.is_available() else "cpu_time_total"
        )
        self.table_kwargs = table_kwargs or {}
        self.profiler_kwargs = {"record_shapes": group_by_input_shapes, **profiler_kwargs}
        self._profiler: torch.profiler.profile | None = None
        self._ranges: dict[str, list[AbstractContextManager[Any]]] = {}
        self._finished: torch.profiler.profile | None = None

    def start(self, action_name: str) -> None:
        if self._profiler is None:
            self._profiler = torch.profiler.profile(**self.profiler_kwargs)
            self._profiler.__enter__()
        labelled = torch.profiler.record_function(action_name)
        labelled.__enter__()
        self._ranges.setdefault(action_name, []).append(labelled)

    def stop(self, action_name: str) -> None:
        started = self._ranges.get(action_name)
        if not started:
            raise ValueError(f"PyTorchProfiler: {action_name!r} was stopped without being started")
        started.pop().__exit__(None, None, None)

    def _finish(self) -> torch.profiler.profile | None:
        """Stop profiling (ranges still open are closed) and keep the result."""
        if self._profiler is not None:
            for opened in self._ranges.values():
                while opened:
                    opened.pop().__exit__(None, None, None)
            self._profiler.__exit__(None, None, None)
            self._finished, self._profiler = self._profiler, None
        return self._finished

    def summary(self) -> str:
        finished = self._finish()
        if finished is None:
            return ""
        if self.export_to_chrome and self.dirpath:
            trace = self.report_path(".pt.trace.json") or Path(self.dirpath) / (
                f"{self._stage or 'run'}-trace.pt.trace.json"
            )
            trace.parent.mkdir(parents=True, exist_ok=True)
            finished.export_chrome_trace(str(trace))
        averages = finished.key_averages(group_by_input_shape=self.group_by_input_shapes)
        return averages.table(
            sort_by=self.sort_by_key, row_limit=self.row_limit, **self.table_kwargs
        )

    def teardown(self, stage: str | None) -> None:
        self._finish()
        self._finished = None
