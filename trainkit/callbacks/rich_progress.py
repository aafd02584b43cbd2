"""RichProgressBar: Lightning's rich progress bar, with its theme and console settings."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from trainkit.callbacks.progress import Bars, ProgressBar
from trainkit.callbacks.rich_bars import RichBars, RichProgressBarTheme

if TYPE_CHECKING:
    from trainkit.module import TrainModule
    from trainkit.trainer.trainer import Trainer

__all__ = ["RichProgressBar", "RichProgressBarTheme"]


class RichProgressBar(ProgressBar):
    """Rich bars for training, validation and testing with the ``prog_bar`` metrics (rank 0)."""

    def __init__(
        self,
        refresh_rate: int = 1,
        leave: bool = False,
        theme: RichProgressBarTheme | None = None,
        console_kwargs: dict[str, Any] | None = None,
    ) -> None:
        """
        Args:
            refresh_rate: Redraw every N batches (0: no bar).
            leave: Keep each finished epoch's bar on screen (False: one bar, reused).
            theme: Styles of the bar's parts (default: RichProgressBarTheme()).
            console_kwargs: Arguments of the rich.console.Console it draws on.
        """
        super().__init__(refresh_rate, force_rich=True)
        self._leave = leave
        self.theme = theme or RichProgressBarTheme()
        self._console_kwargs = console_kwargs

    def make_bars(self) -> Bars:
        return RichBars(self._leave, self.theme, self._console_kwargs)

    def epoch_description(self, trainer: Trainer) -> str:
        epochs = trainer.max_epochs
        if epochs is None or epochs < 1 or math.isinf(epochs):
            return f"Epoch {trainer.current_epoch}"
        return f"Epoch {trainer.current_epoch}/{int(epochs) - 1}"

    def metrics_text(self, trainer: Trainer, pl_module: TrainModule) -> str:
        theme = self.theme
        return theme.metrics_text_delimiter.join(
            f"{name}: {value:{theme.metrics_format}}"
            if isinstance(value, float)
            else f"{name}: {value}"
            for name, value in self.get_metrics(trainer, pl_module).items()
        )
