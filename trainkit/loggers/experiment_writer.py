"""``ExperimentWriter``: what ``CSVLogger.experiment`` is; rows of metrics to ``metrics.csv``
(columns added as they appear) and hyperparameters to ``hparams.yaml``."""

from __future__ import annotations

import csv
from pathlib import Path
from typing import Any

import yaml


class ExperimentWriter:
    """Metrics rows for ``log_dir/metrics.csv`` (appended at each ``save``; a folder that
    already holds the file, an evaluation in its fit's folder, continues it) and hyperparameters
    for ``log_dir/hparams.yaml``."""

    NAME_METRICS_FILE = "metrics.csv"
    NAME_HPARAMS_FILE = "hparams.yaml"

    def __init__(self, log_dir: str) -> None:
        self.log_dir = log_dir
        self.metrics_file_path = str(Path(log_dir) / self.NAME_METRICS_FILE)
        self.metrics: list[dict[str, Any]] = []  # rows not written yet
        self.metrics_keys: list[str] = ["step"]
        self.hparams: dict[str, Any] = {}
        self._logged = 0
        Path(log_dir).mkdir(parents=True, exist_ok=True)

    def log_metrics(self, metrics_dict: dict[str, Any], step: int | None = None) -> None:
        """Add a row (tensors become numbers); ``step`` defaults to the rows logged so far."""
        row: dict[str, Any] = {"step": self._logged if step is None else step}
        for key, value in metrics_dict.items():
            row[key] = value.item() if hasattr(value, "item") else value
        self.metrics.append(row)
        self._logged += 1

    def log_hparams(self, params: dict[str, Any]) -> None:
        """Add ``params`` to the hyperparameters and write ``hparams.yaml``."""
        self.hparams.update(params)
        text = yaml.safe_dump(self.hparams, sort_keys=False)
        (Path(self.log_dir) / self.NAME_HPARAMS_FILE).write_text(text)

    def save(self) -> None:
        """Write the rows logged since the last save."""
        if not self.metrics:
            return
        path = Path(self.metrics_file_path)
        earlier: list[dict[str, str]] = []
        if path.is_file():
            with path.open(newline="") as handle:
                reader = csv.DictReader(handle)
                header = list(reader.fieldnames or [])
                columns = [*header, *(key for key in self._keys() if key not in header)]
                if columns != header:  # the header grows: the file is written again
                    earlier = list(reader)
        else:
            header, columns = [], self._keys()
        append = bool(header) and columns == header
        with path.open("a" if append else "w", newline="") as handle:
            writer = csv.DictWriter(handle, fieldnames=columns)
            if not append:
                writer.writeheader()
                writer.writerows(earlier)
            writer.writerows(self.metrics)
        self.metrics_keys = columns
        self.metrics = []

    def _keys(self) -> list[str]:
        """The columns: those known so far, then new ones in the order they appeared."""
        keys = dict.fromkeys(self.metrics_keys)
        for row in self.metrics:
            keys.update(dict.fromkeys(row))
        return list(keys)
