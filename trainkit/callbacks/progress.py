"""ProgressBar: rich bars on a terminal, one summary line per epoch otherwise; rank 0 only."""

from __future__ import annotations

import sys
import time
from typing import Any

from trainkit.callbacks.base import Callback
from trainkit.metrics import to_float


class ProgressBar(Callback):
    """Show training/validation progress with the ``prog_bar`` metrics, on global rank 0."""

    order = 30  # runs after other callbacks, once epoch metrics are reduced

    def __init__(self, refresh_rate: int = 10, force_rich: bool | None = None) -> None:
        self.refresh_rate = max(1, refresh_rate)
        self.force_rich = force_rich
        self._progress: Any = None
        self._train_task: Any = None
        self._val_task: Any = None
        self._epoch_started = 0.0
        self.enabled = True

    def setup(self, trainer: Any, module: Any, stage: str) -> None:
        self.enabled = trainer.is_global_zero
        use_rich = sys.stdout.isatty() if self.force_rich is None else self.force_rich
        if self.enabled and use_rich and self._progress is None:
            from rich.progress import (
                BarColumn,
                MofNCompleteColumn,
                Progress,
                TextColumn,
                TimeElapsedColumn,
                TimeRemainingColumn,
            )

            self._progress = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                TextColumn("{task.fields[metrics]}"),
                transient=False,
            )
            self._progress.start()

    def teardown(self, trainer: Any, module: Any, stage: str) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def _metrics_text(self, trainer: Any) -> str:
        return "  ".join(f"{k}={to_float(v):.4g}" for k, v in trainer.progress_bar_metrics.items())

    def on_train_epoch_start(self, trainer: Any, module: Any) -> None:
        self._epoch_started = time.perf_counter()
        if self._progress is not None:
            total = trainer.num_training_batches
            if self._train_task is not None:
                self._progress.remove_task(self._train_task)
            self._train_task = self._progress.add_task(
                f"epoch {trainer.current_epoch}",
                total=total if total != float("inf") else None,
                metrics="",
            )

    def on_train_batch_end(
        self, trainer: Any, module: Any, outputs: Any, batch: Any, batch_idx: int
    ) -> None:
        if self._progress is not None and (batch_idx + 1) % self.refresh_rate == 0:
            self._progress.update(
                self._train_task, completed=batch_idx + 1, metrics=self._metrics_text(trainer)
            )

    def on_train_epoch_end(self, trainer: Any, module: Any) -> None:
        if not self.enabled:
            return
        if self._progress is not None:
            self._progress.update(
                self._train_task,
                completed=trainer.num_training_batches_seen,
                metrics=self._metrics_text(trainer),
            )
            return
        seconds = time.perf_counter() - self._epoch_started
        print(
            f"epoch {trainer.current_epoch}: step {trainer.global_step}  "
            f"{self._metrics_text(trainer)}  ({seconds:.2f}s)",
            flush=True,
        )

    def on_validation_epoch_start(self, trainer: Any, module: Any) -> None:
        if self._progress is not None and not trainer.sanity_checking:
            self._val_task = self._progress.add_task(
                "validate", total=trainer.num_eval_batches or None, metrics=""
            )

    def on_validation_batch_end(self, trainer, module, outputs, batch, batch_idx, dataloader_idx=0):
        if self._val_task is not None:  # each loader restarts batch_idx and sets its total
            total = trainer.num_eval_batches or None
            self._progress.update(self._val_task, total=total, completed=batch_idx + 1)

    def on_validation_epoch_end(self, trainer: Any, module: Any) -> None:
        if self._val_task is not None:
            self._progress.remove_task(self._val_task)
            self._val_task = None
