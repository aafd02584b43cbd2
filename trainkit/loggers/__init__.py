"""Loggers: TensorBoard and CSV (sharing one ``version_N`` folder per run), MLflow and W&B.

The MLflow and W&B modules import their packages only when a run starts, so importing them here
(which lets YAML name them by short class name) costs nothing.
"""

from __future__ import annotations

from trainkit.loggers.base import Logger, next_version
from trainkit.loggers.csv import CSVLogger
from trainkit.loggers.experiment_writer import ExperimentWriter
from trainkit.loggers.mlflow import MLFlowLogger
from trainkit.loggers.tensorboard import TensorBoardLogger
from trainkit.loggers.wandb import WandbLogger

__all__ = [
    "CSVLogger",
    "ExperimentWriter",
    "Logger",
    "MLFlowLogger",
    "TensorBoardLogger",
    "WandbLogger",
    "next_version",
]
