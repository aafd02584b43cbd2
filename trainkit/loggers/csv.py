"""CSVLogger: ``metrics.csv`` with one row per logged step, columns sorted by name (as
Lightning's), and ``hparams.yaml``: the module's hyperparameters and whatever else
``log_hyperparams`` is given."""

from __future__ import annotations

from argparse import Namespace
from pathlib import Path
from typing import Any

from trainkit.loggers.base import Logger
from trainkit.loggers.experiment_writer import ExperimentWriter, as_dict


class CSVLogger(Logger):
    """Write every logged metric to ``log_dir/metrics.csv``."""

    def __init__(
        self,
        save_dir: str | None = None,
        name: str | None = "trainkit_logs",
        version: int | str | None = None,
        prefix: str = "",
        flush_logs_every_n_steps: int = 100,
    ) -> None:
        """
        Args:
            save_dir: Folder the runs go under (default: the Trainer's default_root_dir).
            name: Experiment folder inside save_dir (None or '': runs directly in save_dir).
            version: Run folder: an int for version_N, a string as is (default: the next N).
            prefix: Put before every metric name (``prefix-name``).
            flush_logs_every_n_steps: Write metrics.csv at least this often (and at epoch ends).
        """
        super().__init__(save_dir, name, version, prefix)
        self.flush_logs_every_n_steps = flush_logs_every_n_steps
        self._experiment: ExperimentWriter | None = None

    @property
    def experiment(self) -> ExperimentWriter:
        """The writer of ``log_dir``'s files (Lightning's ``ExperimentWriter``): ``log_metrics``,
        ``log_hparams``, ``save``."""
        if self._experiment is None:
            self._experiment = ExperimentWriter(self.log_dir)
        return self._experiment

    @property
    def metrics_file(self) -> Path:
        return Path(self.experiment.metrics_file_path)

    keeps_hparams_file = True

    def log_hyperparams(self, params: dict[str, Any] | Namespace) -> None:
        """Add ``params`` to ``hparams.yaml`` (each call's, as Lightning's CSVLogger)."""
        self.experiment.log_hparams(as_dict(params))

    def log_metrics(self, metrics: dict[str, float], step: int) -> None:
        self.experiment.log_metrics(self.prefixed(metrics), step)
        if (step + 1) % self.flush_logs_every_n_steps == 0:  # Lightning's rule
            self.save()

    def save(self) -> None:
        self.experiment.save()
