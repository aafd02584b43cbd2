"""trainkit: a config-driven training launcher for PyTorch, one device to many.

Importing trainkit is cheap: the names below load on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

_LAZY = {
    "Trainer": "trainkit.trainer",
    "TrainModule": "trainkit.module",
    "DataModule": "trainkit.datamodule",
    "LightningModule": "trainkit.module",
    "LightningDataModule": "trainkit.datamodule",
    "seed_everything": "trainkit.seed",
    "Callback": "trainkit.callbacks.base",
    "ModelCheckpoint": "trainkit.callbacks.checkpoint",
    "EarlyStopping": "trainkit.callbacks.early_stopping",
    "LearningRateMonitor": "trainkit.callbacks.lr_monitor",
    "ProgressBar": "trainkit.callbacks.progress",
    "TensorBoardLogger": "trainkit.loggers.tensorboard",
    "CSVLogger": "trainkit.loggers.csv",
    "MLFlowLogger": "trainkit.loggers.mlflow",
    "WandbLogger": "trainkit.loggers.wandb",
    "TrainkitCLI": "trainkit.cli.command",
    "rank_zero_only": "trainkit.distributed.comm",
    "rank_zero_info": "trainkit.distributed.comm",
    "barrier": "trainkit.distributed.comm",
    "parse_devices": "trainkit.devices",
    "PREEMPTED_EXIT_CODE": "trainkit.distributed.signals",
}

__all__ = [*_LAZY, "__version__"]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    if name in ("callbacks", "loggers", "strategies"):  # `pl.callbacks.EarlyStopping`, as Lightning
        return importlib.import_module(f"trainkit.{name}")
    raise AttributeError(f"module 'trainkit' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
