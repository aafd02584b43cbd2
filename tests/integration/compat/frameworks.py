"""In-process runs of one small program under trainkit and under Lightning: the frameworks as
a parameter (Lightning's skipped where it is not installed), a quiet Trainer and a logger that
records what it is given."""

from __future__ import annotations

import importlib
import importlib.util
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch

LIGHTNING = importlib.util.find_spec("lightning") is not None
lightning_installed = pytest.mark.skipif(
    not LIGHTNING,
    reason="Lightning is not installed (pip install 'lightning==2.6.*' to compare with it)",
)
# ``pl_name`` for a test parametrized over both: the module a Lightning program imports as pl
BOTH = pytest.mark.parametrize(
    "pl_name",
    [
        pytest.param("trainkit", id="trainkit"),
        pytest.param(
            "lightning.pytorch",
            id="lightning",
            marks=[lightning_installed, pytest.mark.lightning],
        ),
    ],
)


def framework(name: str) -> ModuleType:
    """``trainkit`` or ``lightning.pytorch``, imported."""
    return importlib.import_module(name)


def lightning() -> ModuleType:
    return framework("lightning.pytorch")


def quiet_trainer(pl: ModuleType, root: Path, **kwargs: Any) -> Any:
    """A CPU Trainer of ``pl`` without bar, summary, sanity check or checkpoints (unless
    given), writing under ``root``."""
    settings: dict[str, Any] = {
        "default_root_dir": str(root),
        "enable_progress_bar": False,
        "enable_model_summary": False,
        "enable_checkpointing": False,
        "num_sanity_val_steps": 0,
        "accelerator": "cpu",
        "devices": 1,
    }
    settings.update(kwargs)
    return pl.Trainer(**settings)


def recorder(pl: ModuleType, root: Path) -> Any:
    """A logger of ``pl`` that keeps ``(step, {name: value})`` for every ``log_metrics`` call
    in ``records`` and every ``log_hyperparams`` in ``hparams``."""

    class Recorder(pl.loggers.Logger):
        def __init__(self) -> None:
            super().__init__()
            self.records: list[tuple[int, dict[str, float]]] = []
            self.hparams: list[dict[str, Any]] = []

        @property
        def name(self) -> str:
            return "recorder"

        @property
        def version(self) -> int:
            return 0

        @property
        def save_dir(self) -> str:
            return str(root)

        def log_hyperparams(self, params, *args, **kwargs) -> None:
            self.hparams.append(dict(params))

        def log_metrics(self, metrics, step=None) -> None:
            self.records.append((step, {k: round(float(v), 6) for k, v in metrics.items()}))

    return Recorder()


def logged_names(logger: Any) -> list[tuple[int, tuple[str, ...]]]:
    """``(step, sorted names)`` of each ``log_metrics`` call a ``recorder`` logger kept."""
    return [(step, tuple(sorted(values))) for step, values in logger.records]


def seeded() -> None:
    torch.manual_seed(0)
