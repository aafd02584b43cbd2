"""TQDMProgressBar: Lightning's default progress bar, drawn with tqdm."""

from __future__ import annotations

import math
import sys
from typing import TYPE_CHECKING, Any

from trainkit.callbacks.progress import Bars, ProgressBar

if TYPE_CHECKING:
    from trainkit.module import TrainModule
    from trainkit.trainer.trainer import Trainer


class TqdmBars:
    """A training bar (a new one per epoch with ``leave``, else reset) and an evaluation bar
    below it, drawn with tqdm on stdout."""

    def __init__(self, process_position: int = 0, leave: bool = False) -> None:
        self.position = 2 * process_position
        self.leave = leave
        self._train: Any = None
        self._eval: Any = None

    def _bar(self, description: str, total: int | None, offset: int, leave: bool) -> Any:
        from tqdm import tqdm

        return tqdm(
            desc=description,
            total=total,
            position=self.position + offset,
            leave=leave,
            dynamic_ncols=True,
            file=sys.stdout,
            smoothing=0,
        )

    def start(self) -> None: ...

    def stop(self) -> None:
        for bar in (self._eval, self._train):
            if bar is not None:
                bar.close()
        self._train = self._eval = None

    def train_start(self, description: str, total: int | None) -> None:
        if self._train is not None and not self.leave:
            self._train.reset(total=total)
            self._train.set_description(description)
            return
        if self._train is not None:
            self._train.close()
        self._train = self._bar(description, total, 0, self.leave)

    def train_update(self, completed: int, metrics: str) -> None:
        if self._train is not None:
            self._train.n = completed
            self._train.set_postfix_str(metrics, refresh=False)
            self._train.refresh()

    def eval_start(self, description: str, total: int | None) -> None:
        self.eval_end()
        self._eval = self._bar(description, total, 1, False)

    def eval_update(self, completed: int, total: int | None) -> None:
        if self._eval is not None:
            if total != self._eval.total:
                self._eval.reset(total=total)
            self._eval.n = completed
            self._eval.refresh()

    def eval_end(self) -> None:
        if self._eval is not None:
            self._eval.close()
            self._eval = None


class TQDMProgressBar(ProgressBar):
    """tqdm bars for training, validation and testing with the ``prog_bar`` metrics (rank 0)."""

    def __init__(
        self, refresh_rate: int = 1, process_position: int = 0, leave: bool = False
    ) -> None:
        """
        Args:
            refresh_rate: Redraw every N batches (0: no bar).
            process_position: Where the bars go when several programs draw tqdm bars at once.
            leave: Keep each finished epoch's bar on screen (False: one bar, reset each epoch).
        """
        super().__init__(refresh_rate, force_rich=True)
        self._process_position = process_position
        self._leave = leave

    @property
    def process_position(self) -> int:
        return self._process_position

    def make_bars(self) -> Bars:
        return TqdmBars(self._process_position, self._leave)

    def epoch_description(self, trainer: Trainer) -> str:
        return f"Epoch {trainer.current_epoch}"

    def metrics_text(self, trainer: Trainer, pl_module: TrainModule) -> str:
        return ", ".join(
            f"{name}={value:.3g}"
            if isinstance(value, float) and math.isfinite(value)
            else f"{name}={value}"
            for name, value in self.get_metrics(trainer, pl_module).items()
        )
