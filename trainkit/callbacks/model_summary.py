"""ModelSummary: a table of the module's layers and parameter counts when fit starts."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from torch import nn

from trainkit.callbacks.base import Callback
from trainkit.errors import ConfigError

if TYPE_CHECKING:
    from trainkit.module import TrainModule
    from trainkit.trainer.trainer import Trainer

COLUMNS = ("", "Name", "Type", "Params", "Mode")


@dataclass(frozen=True)
class Summary:
    """What a model summary shows: a row per layer, then the totals."""

    rows: list[tuple[str, str, str, int, str]] = field(default_factory=list)  # idx, name, ...
    trainable: int = 0
    total: int = 0
    size_mb: float = 0.0
    train_modules: int = 0
    eval_modules: int = 0

    @property
    def non_trainable(self) -> int:
        return self.total - self.trainable

    def totals(self) -> list[tuple[str, str]]:
        """(value, label) lines under the table, as Lightning prints them."""
        return [
            (human_count(self.trainable), "Trainable params"),
            (human_count(self.non_trainable), "Non-trainable params"),
            (human_count(self.total), "Total params"),
            (f"{self.size_mb:,.3f}", "Total estimated model params size (MB)"),
            (str(self.train_modules), "Modules in train mode"),
            (str(self.eval_modules), "Modules in eval mode"),
        ]


def _count(params: Iterable[nn.Parameter]) -> int:
    return sum(
        0 if isinstance(p, nn.parameter.UninitializedParameter) else p.numel() for p in params
    )


def summarize(module: nn.Module, max_depth: int = 1) -> Summary:
    """The layers of ``module`` down to ``max_depth`` (-1: every layer) and its totals."""
    rows = []
    for name, layer in module.named_modules():
        depth = name.count(".") + 1
        if not name or (max_depth != -1 and depth > max_depth):
            continue
        mode = "train" if layer.training else "eval"
        rows.append((str(len(rows)), name, type(layer).__name__, _count(layer.parameters()), mode))
    params = list(module.parameters())
    modes = [m.training for m in module.modules()]
    size = sum(
        0 if isinstance(p, nn.parameter.UninitializedParameter) else p.numel() * p.element_size()
        for p in params
    )
    return Summary(
        rows=rows,
        trainable=_count(p for p in params if p.requires_grad),
        total=_count(params),
        size_mb=size / 1e6,
        train_modules=sum(modes),
        eval_modules=len(modes) - sum(modes),
    )


def human_count(number: float) -> str:
    """123 -> '123', 1234 -> '1.2 K', 2_500_000 -> '2.5 M' (K, M, B, T)."""
    units = ["", "K", "M", "B", "T"]
    index = 0
    while abs(number) >= 1000 and index < len(units) - 1:
        number /= 1000
        index += 1
    if index == 0:
        return str(int(number))
    return f"{number:,.1f} {units[index]}"


class ModelSummary(Callback):
    """Print a table of the layers and the parameter totals when fit starts (global rank 0)."""

    def __init__(self, max_depth: int = 1, **summarize_kwargs: object) -> None:
        """
        Args:
            max_depth: How deep the layer table goes (1: direct children, -1: all, 0: no summary).
        """
        if isinstance(max_depth, bool) or not isinstance(max_depth, int) or max_depth < -1:
            raise ConfigError("ModelSummary max_depth", max_depth, "an int >= -1 (-1: all layers)")
        self._max_depth = max_depth
        self._summarize_kwargs = summarize_kwargs

    def on_fit_start(self, trainer: Trainer, pl_module: TrainModule) -> None:
        if not self._max_depth:
            return
        summary = summarize(pl_module, self._max_depth)
        if trainer.is_global_zero:
            self.summarize(summary, **self._summarize_kwargs)

    @staticmethod
    def summarize(summary: Summary, **summarize_kwargs: object) -> None:
        """Print ``summary`` as a plain-text table."""
        print(format_table(summary), flush=True)


def format_table(summary: Summary) -> str:
    """The summary as Lightning's plain-text table, with the totals below."""
    cells = [COLUMNS] + [
        (idx, name, kind, human_count(count), mode) for idx, name, kind, count, mode in summary.rows
    ]
    widths = [max(len(str(row[i])) for row in cells) for i in range(len(COLUMNS))]

    def line(row: tuple) -> str:
        return " | ".join(str(cell).ljust(width) for cell, width in zip(row, widths)).rstrip()

    rule = "-" * max(len(line(COLUMNS)), 20)
    lines = [line(COLUMNS), rule, *(line(row) for row in cells[1:]), rule]
    lines += [f"{value:<10}{label}" for value, label in summary.totals()]
    return "\n".join(lines)
