"""CSVLogger: ``metrics.csv`` with one row per logged step, columns added as they appear."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

from trainkit.loggers.base import Logger


class CSVLogger(Logger):
    """Write every logged metric to ``log_dir/metrics.csv``."""

    def __init__(
        self,
        save_dir: str = ".",
        name: str | None = "trainkit_logs",
        version: int | str | None = None,
        prefix: str = "",
        flush_logs_every_n_steps: int = 100,
    ) -> None:
        """
        Args:
            save_dir: Folder the runs go under.
            name: Experiment folder inside save_dir (None or '': runs directly in save_dir).
            version: Run folder: an int for version_N, a string as is (default: the next N).
            prefix: Put before every metric name (``prefix-name``).
            flush_logs_every_n_steps: Write metrics.csv at least this often (and at epoch ends).
        """
        super().__init__(save_dir, name, version, prefix)
        self.flush_logs_every_n_steps = flush_logs_every_n_steps
        self.rows: list[dict[str, Any]] = []
        self._columns: dict[str, None] = {"step": None}
        self._written = 0

    @property
    def metrics_file(self) -> Path:
        return Path(self.log_dir) / "metrics.csv"

    def _keep_existing_rows(self, path: Path) -> None:
        with path.open(newline="") as handle:
            reader = csv.DictReader(handle)
            existing = [{k: v for k, v in row.items() if v != ""} for row in reader]
            columns = dict.fromkeys(reader.fieldnames or [])
        self.rows[:0] = existing
        self._columns = {**columns, **self._columns}
        self._written = 0

    def log_metrics(self, metrics: dict[str, float], step: int) -> None:
        metrics = self.prefixed(metrics)
        self.rows.append({"step": step, **metrics})
        for key in metrics:
            self._columns.setdefault(key, None)
        if step % self.flush_logs_every_n_steps == 0:
            self.save()

    def save(self) -> None:
        if len(self.rows) == self._written:
            return
        path = self.metrics_file
        path.parent.mkdir(parents=True, exist_ok=True)
        if self._written == 0 and path.is_file():  # a run's folder reused (an evaluation): append
            self._keep_existing_rows(path)
        with path.open("w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=list(self._columns))
            writer.writeheader()
            writer.writerows(self.rows)
        self._written = len(self.rows)
