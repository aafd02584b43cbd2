"""trainkit: a config-driven training launcher for PyTorch, one device to many.

Importing trainkit is cheap: the names below load on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trainkit.common.lazy import lazy_exports

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
    "cli_lightning_logo": "trainkit.logo",
    "LIGHTNING_LOGO": "trainkit.logo",
}

# Lightning's subpackages, reachable as attributes of the package (each imported on first use)
SUBPACKAGES = (
    "accelerators",
    "callbacks",
    "cli",
    "core",
    "demos",
    "loggers",
    "plugins",
    "profilers",
    "strategies",
    "trainer",
    "utilities",
)

if TYPE_CHECKING:  # what type checkers and editors see; at run time each loads on first use
    from trainkit.callbacks.base import Callback
    from trainkit.callbacks.checkpoint import ModelCheckpoint
    from trainkit.callbacks.early_stopping import EarlyStopping
    from trainkit.callbacks.lr_monitor import LearningRateMonitor
    from trainkit.callbacks.progress import ProgressBar
    from trainkit.cli.command import TrainkitCLI
    from trainkit.datamodule import DataModule, LightningDataModule
    from trainkit.devices import parse_devices
    from trainkit.distributed.comm import barrier, rank_zero_info, rank_zero_only
    from trainkit.distributed.signals import PREEMPTED_EXIT_CODE
    from trainkit.loggers.csv import CSVLogger
    from trainkit.loggers.mlflow import MLFlowLogger
    from trainkit.loggers.tensorboard import TensorBoardLogger
    from trainkit.loggers.wandb import WandbLogger
    from trainkit.logo import LIGHTNING_LOGO, cli_lightning_logo
    from trainkit.module import LightningModule, TrainModule
    from trainkit.seed import seed_everything
    from trainkit.trainer import Trainer

__all__ = [
    "LIGHTNING_LOGO",
    "PREEMPTED_EXIT_CODE",
    "CSVLogger",
    "Callback",
    "DataModule",
    "EarlyStopping",
    "LearningRateMonitor",
    "LightningDataModule",
    "LightningModule",
    "MLFlowLogger",
    "ModelCheckpoint",
    "ProgressBar",
    "TensorBoardLogger",
    "TrainModule",
    "Trainer",
    "TrainkitCLI",
    "WandbLogger",
    "__version__",
    "barrier",
    "cli_lightning_logo",
    "parse_devices",
    "rank_zero_info",
    "rank_zero_only",
    "seed_everything",
]


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, __all__, SUBPACKAGES)
