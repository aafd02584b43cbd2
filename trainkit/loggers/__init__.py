"""Loggers: TensorBoard and CSV, sharing one ``version_N`` folder per run."""

from __future__ import annotations

from trainkit.loggers.base import Logger, next_version
from trainkit.loggers.csv import CSVLogger
from trainkit.loggers.tensorboard import TensorBoardLogger

__all__ = ["CSVLogger", "Logger", "TensorBoardLogger", "next_version"]
