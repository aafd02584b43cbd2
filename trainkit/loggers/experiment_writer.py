"""``ExperimentWriter``: what ``CSVLogger.experiment`` is; rows of metrics to ``metrics.csv``
(columns sorted by name, as Lightning's) and hyperparameters to ``hparams.yaml``."""

from __future__ import annotations

import csv
from argparse import Namespace
from collections.abc import Mapping
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
        Path(log_dir).mkdir(parents=True, exist_ok=True)

    def log_metrics(self, metrics_dict: dict[str, Any], step: int | None = None) -> None:
        """Add a row (tensors become numbers); ``step`` defaults to the rows not yet saved
        (Lightning's count)."""
        row: dict[str, Any] = {"step": len(self.metrics) if step is None else step}
        for key, value in metrics_dict.items():
            row[key] = value.item() if hasattr(value, "item") else value
        self.metrics.append(row)

    def log_hparams(self, params: dict[str, Any]) -> None:
        """Add ``params`` to the hyperparameters and write ``hparams.yaml``."""
        self.hparams.update(params)
        update_hparams_file(self.log_dir, self.hparams)

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
                new = [key for key in self._keys() if key not in header]
                columns = sorted([*header, *new]) if new else header
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
        """The columns, sorted by name as Lightning's: those known so far and the new ones."""
        keys = dict.fromkeys(self.metrics_keys)
        for row in self.metrics:
            keys.update(dict.fromkeys(row))
        return sorted(keys)


def as_dict(params: Mapping[str, Any] | Namespace) -> dict[str, Any]:
    """A logger's ``log_hyperparams`` argument as a dict (an argparse ``Namespace`` too)."""
    return dict(vars(params) if isinstance(params, Namespace) else params)


def update_hparams_file(log_dir: str, params: Mapping[str, Any]) -> None:
    """Write ``log_dir/hparams.yaml``: what it holds already (written earlier in the run, or by
    another logger of the same folder) updated with ``params``; a value YAML cannot hold is
    written as its text."""
    path = Path(log_dir) / ExperimentWriter.NAME_HPARAMS_FILE
    held: Any = None
    if path.is_file():
        try:
            held = yaml.safe_load(path.read_text())
        except yaml.YAMLError:
            held = None
    merged: dict[str, Any] = {}
    for key, value in params.items():
        try:
            yaml.safe_dump(value)
        except yaml.YAMLError:
            value = str(value)
        merged[key] = value
    if isinstance(held, dict):  # in the order given, then the file's others
        merged.update((key, value) for key, value in held.items() if key not in merged)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(merged, sort_keys=False))
