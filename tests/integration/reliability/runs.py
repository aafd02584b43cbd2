"""Configs and helpers the reliability tests share: one run of the noisy regressor, its weights."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
import yaml


def write_config(
    folder: Path,
    devices: int = 1,
    workers: int = 0,
    train_size: int = 48,
    data: dict[str, Any] | None = None,
    **model: Any,
) -> Path:
    """A fit config for tests.helpers.resumable, saving every 5 steps (all kept)."""
    config = {
        "seed_everything": 7,
        "model": {"class_path": "tests.helpers.resumable.NoisyRegressor", "init_args": model},
        "data": {
            "class_path": "tests.helpers.resumable.NoisyData",
            "init_args": {"num_workers": workers, "train_size": train_size, **(data or {})},
        },
        "trainer": {
            "accelerator": "cpu",
            "devices": devices,
            "max_epochs": 3,
            "enable_progress_bar": False,
            "logger": ["CSVLogger"],  # metrics.csv: what logged_at_epoch reads
            "callbacks": [
                {
                    "class_path": "trainkit.callbacks.ModelCheckpoint",
                    "init_args": {"every_n_train_steps": 5, "save_top_k": -1},
                }
            ],
        },
    }
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


def checkpoints(root: Path) -> dict[str, Path]:
    """Checkpoint files under ``root`` by name (newest version folder wins)."""
    found = sorted(root.glob("**/checkpoints/*.ckpt"), key=lambda p: p.stat().st_mtime_ns)
    return {path.name: path for path in found}


def weights(path: Path) -> dict[str, torch.Tensor]:
    return torch.load(path, weights_only=True)["state_dict"]


def assert_same_weights(a: Path, b: Path) -> None:
    first, second = weights(a), weights(b)
    assert first.keys() == second.keys()
    for key in first:
        assert torch.equal(first[key], second[key]), f"{key} differs: {a} vs {b}"


def logged_at_epoch(root: Path, name: str, epoch: int) -> str:
    """The value of ``name`` that the run's metrics.csv holds for ``epoch``, as written."""
    import csv

    with next(root.glob("**/metrics.csv")).open() as handle:
        rows = [row for row in csv.DictReader(handle) if row.get(name)]
    (value,) = [row[name] for row in rows if row.get("epoch") == str(epoch)]
    return value
