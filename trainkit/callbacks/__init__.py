"""Callbacks, with Lightning's names and arguments; import them from here (each loads on first
use, so importing this package is cheap)."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from trainkit.callbacks.base import Callback, Checkpoint
from trainkit.common.lazy import lazy_exports

_LAZY = {
    "ModelCheckpoint": "trainkit.callbacks.checkpoint",
    "OnExceptionCheckpoint": "trainkit.callbacks.on_exception_checkpoint",
    "EarlyStopping": "trainkit.callbacks.early_stopping",
    "EarlyStoppingReason": "trainkit.callbacks.early_stopping",
    "LearningRateMonitor": "trainkit.callbacks.lr_monitor",
    "ProgressBar": "trainkit.callbacks.progress",
    "RichProgressBar": "trainkit.callbacks.rich_progress",
    "RichProgressBarTheme": "trainkit.callbacks.rich_bars",
    "TQDMProgressBar": "trainkit.callbacks.tqdm_progress",
    "ModelSummary": "trainkit.callbacks.model_summary",
    "RichModelSummary": "trainkit.callbacks.rich_model_summary",
    "BaseFinetuning": "trainkit.callbacks.finetuning",
    "BackboneFinetuning": "trainkit.callbacks.finetuning",
    "StochasticWeightAveraging": "trainkit.callbacks.stochastic_weight_avg",
    "GradientAccumulationScheduler": "trainkit.callbacks.gradient_accumulation_scheduler",
    "Timer": "trainkit.callbacks.timer",
    "LearningRateFinder": "trainkit.tuner.learning_rate_finder",
    "BatchSizeFinder": "trainkit.tuner.batch_size_finder",
    "LambdaCallback": "trainkit.callbacks.lambda_function",
    "BasePredictionWriter": "trainkit.callbacks.prediction_writer",
    "DeviceStatsMonitor": "trainkit.callbacks.device_stats_monitor",
    "WeightAveraging": "trainkit.callbacks.weight_averaging",
    "EMAWeightAveraging": "trainkit.callbacks.weight_averaging",
}

if TYPE_CHECKING:  # what type checkers and editors see; at run time each loads on first use
    from trainkit.callbacks.checkpoint import ModelCheckpoint
    from trainkit.callbacks.device_stats_monitor import DeviceStatsMonitor
    from trainkit.callbacks.early_stopping import EarlyStopping, EarlyStoppingReason
    from trainkit.callbacks.finetuning import BackboneFinetuning, BaseFinetuning
    from trainkit.callbacks.gradient_accumulation_scheduler import GradientAccumulationScheduler
    from trainkit.callbacks.lambda_function import LambdaCallback
    from trainkit.callbacks.lr_monitor import LearningRateMonitor
    from trainkit.callbacks.model_summary import ModelSummary
    from trainkit.callbacks.on_exception_checkpoint import OnExceptionCheckpoint
    from trainkit.callbacks.prediction_writer import BasePredictionWriter
    from trainkit.callbacks.progress import ProgressBar
    from trainkit.callbacks.rich_bars import RichProgressBarTheme
    from trainkit.callbacks.rich_model_summary import RichModelSummary
    from trainkit.callbacks.rich_progress import RichProgressBar
    from trainkit.callbacks.stochastic_weight_avg import StochasticWeightAveraging
    from trainkit.callbacks.timer import Timer
    from trainkit.callbacks.tqdm_progress import TQDMProgressBar
    from trainkit.callbacks.weight_averaging import EMAWeightAveraging, WeightAveraging
    from trainkit.tuner.batch_size_finder import BatchSizeFinder
    from trainkit.tuner.learning_rate_finder import LearningRateFinder

__all__ = [
    "BackboneFinetuning",
    "BaseFinetuning",
    "BasePredictionWriter",
    "BatchSizeFinder",
    "Callback",
    "Checkpoint",
    "DeviceStatsMonitor",
    "EMAWeightAveraging",
    "EarlyStopping",
    "EarlyStoppingReason",
    "GradientAccumulationScheduler",
    "LambdaCallback",
    "LearningRateFinder",
    "LearningRateMonitor",
    "ModelCheckpoint",
    "ModelSummary",
    "OnExceptionCheckpoint",
    "ProgressBar",
    "RichModelSummary",
    "RichProgressBar",
    "RichProgressBarTheme",
    "StochasticWeightAveraging",
    "TQDMProgressBar",
    "Timer",
    "WeightAveraging",
]


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, __all__)


def import_all() -> None:
    """Load every callback class, so a config can name one by its short class name
    (``class_path: RichProgressBar``): jsonargparse resolves short names among loaded classes."""
    for module in sorted(set(_LAZY.values())):
        importlib.import_module(module)
