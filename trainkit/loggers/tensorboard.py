"""TensorBoardLogger: event files readable by ``tensorboard`` and its EventAccumulator."""

from __future__ import annotations

from typing import Any

from trainkit.loggers.base import Logger


class TensorBoardLogger(Logger):
    """Write scalars and hyperparameters as TensorBoard events under ``log_dir``."""

    def __init__(
        self, save_dir: str = ".", name: str = "trainkit_logs", version: int | str | None = None
    ) -> None:
        super().__init__(save_dir, name, version)
        self._writer: Any = None

    @property
    def experiment(self) -> Any:
        """The underlying ``SummaryWriter`` (created on first use)."""
        if self._writer is None:
            from torch.utils.tensorboard import SummaryWriter

            self._writer = SummaryWriter(log_dir=self.log_dir)
        return self._writer

    def log_metrics(self, metrics: dict[str, float], step: int) -> None:
        writer = self.experiment
        for key, value in metrics.items():
            writer.add_scalar(key, value, global_step=step)

    def log_hyperparams(self, params: dict[str, Any]) -> None:
        from torch.utils.tensorboard.summary import hparams

        flat = {
            k: v if isinstance(v, int | float | str | bool) else str(v) for k, v in params.items()
        }
        experiment, start, end = hparams(flat, metric_dict={})
        writer = self.experiment.file_writer
        for summary in (experiment, start, end):
            writer.add_summary(summary)

    def save(self) -> None:
        if self._writer is not None:
            self._writer.flush()

    def finalize(self, status: str) -> None:
        if self._writer is not None:
            self._writer.flush()
            self._writer.close()
            self._writer = None
