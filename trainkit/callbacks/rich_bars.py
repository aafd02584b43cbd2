"""Rich progress bars for the progress-bar callbacks, and RichProgressBar's theme."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class RichProgressBarTheme:
    """The styles of RichProgressBar's parts (rich style strings) and its metrics' format."""

    description: str = ""
    progress_bar: str = "#6206E0"
    progress_bar_finished: str = "#6206E0"
    progress_bar_pulse: str = "#6206E0"
    batch_progress: str = ""
    time: str = "dim"
    processing_speed: str = "dim underline"
    metrics: str = "italic"
    metrics_text_delimiter: str = " "
    metrics_format: str = ".3f"


class RichBars:
    """One training bar (a new one per epoch with ``leave``, else reused) and one evaluation
    bar at a time, drawn with rich.progress."""

    def __init__(
        self,
        leave: bool = False,
        theme: RichProgressBarTheme | None = None,
        console_kwargs: dict[str, Any] | None = None,
    ) -> None:
        self.leave = leave
        self.theme = theme or RichProgressBarTheme()
        self.console_kwargs = console_kwargs or {}
        self.progress: Any = None
        self._train: Any = None
        self._eval: Any = None

    def start(self) -> None:
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        theme = self.theme
        self.progress = Progress(
            TextColumn("{task.description}", style=theme.description),
            BarColumn(
                complete_style=theme.progress_bar,
                finished_style=theme.progress_bar_finished,
                pulse_style=theme.progress_bar_pulse,
            ),
            TextColumn("{task.completed}/{task.total}", style=theme.batch_progress),
            TimeElapsedColumn(),
            TextColumn("•", style=theme.time),
            TimeRemainingColumn(),
            TextColumn("{task.fields[metrics]}", style=theme.metrics),
            console=Console(**self.console_kwargs),
            transient=False,
        )
        self.progress.start()

    def stop(self) -> None:
        if self.progress is not None:
            self.progress.stop()
            self.progress = None
            self._train = self._eval = None

    def train_start(self, description: str, total: int | None) -> None:
        progress = self.progress
        if self._train is not None and not self.leave:
            progress.reset(self._train, total=total, description=description, metrics="")
            return
        self._train = progress.add_task(description, total=total, metrics="")

    def train_update(self, completed: int, metrics: str) -> None:
        if self._train is not None:
            self.progress.update(self._train, completed=completed, metrics=metrics)

    def eval_start(self, description: str, total: int | None) -> None:
        self.eval_end()
        self._eval = self.progress.add_task(description, total=total, metrics="")

    def eval_update(self, completed: int, total: int | None) -> None:
        if self._eval is not None:  # each loader restarts at batch 0 and sets its total
            self.progress.update(self._eval, total=total, completed=completed)

    def eval_end(self) -> None:
        if self._eval is not None:
            self.progress.remove_task(self._eval)
            self._eval = None
