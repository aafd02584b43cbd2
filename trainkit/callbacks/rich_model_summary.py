"""RichModelSummary: ModelSummary drawn as a rich table."""

from __future__ import annotations

from typing import Any

from trainkit.callbacks.model_summary import COLUMNS, ModelSummary, Summary, human_count


class RichModelSummary(ModelSummary):
    """The layer table and parameter totals of ModelSummary, drawn with rich, on global rank 0."""

    def __init__(self, max_depth: int = 1, **summarize_kwargs: object) -> None:
        """
        Args:
            max_depth: How deep the layer table goes (1: direct children, -1: all, 0: no summary).
        """
        super().__init__(max_depth, **summarize_kwargs)

    @staticmethod
    def summarize(summary: Summary, **summarize_kwargs: Any) -> None:
        """Print ``summary`` as a rich table (``header_style`` sets the header's style)."""
        from rich.console import Console
        from rich.table import Table

        table = Table(header_style=summarize_kwargs.get("header_style", "bold magenta"))
        for column in COLUMNS:
            table.add_column(column, style="dim" if not column else None)
        for idx, name, kind, count, mode in summary.rows:
            table.add_row(idx, name, kind, human_count(count), mode)
        console = Console()
        console.print(table)
        width = max(len(value) for value, _ in summary.totals())
        for value, label in summary.totals():
            console.print(f"[bold]{value:<{width}}[/bold] {label}", highlight=False)
