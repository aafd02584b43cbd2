"""Human-readable output: metric tables after validate/test."""

from __future__ import annotations

import sys

from trainkit.distributed.env import output_is_terminal


def print_metrics(stage: str, results: list[dict[str, float]]) -> None:
    """A table of each dataloader's metrics: rich on a terminal, plain text otherwise."""
    rows = [(name, value) for result in results for name, value in result.items()]
    if not rows:
        return
    if output_is_terminal():  # not mpirun's pty
        from rich.console import Console
        from rich.table import Table

        table = Table(title=f"{stage} results")
        table.add_column("metric")
        table.add_column("value", justify="right")
        for name, value in rows:
            table.add_row(name, f"{value:.6g}")
        Console().print(table)
        return
    width = max(len(name) for name, _ in rows)
    print(f"{stage} results", flush=False)
    for name, value in rows:
        print(f"  {name:<{width}}  {value:.6g}")
    sys.stdout.flush()
