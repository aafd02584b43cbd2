"""The Trainer as trainkit's callbacks see it, a Protocol: their hooks annotate ``trainer``
with ``TrainerView``. The callbacks never import the Trainer (nothing below ``trainer/`` does);
the Trainer's Lightning-named read-outs (``trainer/properties.py``) satisfy it.

It lists the Trainer's public read-outs, not only those the built-in callbacks use.
``Callback``'s own hooks take ``trainer: Any``, so a user's callback may annotate it with the
Trainer class (as a Lightning callback annotates ``pl.Trainer``) or with this Protocol.

A leaf: the types it names are imported for type checkers only, from modules that never import
the callbacks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import torch

    from trainkit.datamodule import DataModule
    from trainkit.loggers.base import Logger
    from trainkit.loops.state import RunState
    from trainkit.module import TrainModule
    from trainkit.optim import SchedulerConfig
    from trainkit.profilers import Profiler
    from trainkit.strategies.base import Strategy
    from trainkit.strategies.precision import Precision
    from trainkit.trainer.states import TrainerState


class TrainerView(Protocol):
    """The Trainer's public members that callbacks use (Lightning's names)."""

    fast_dev_run: int
    default_root_dir: str

    # ---- written by callbacks -------------------------------------------------------------------
    @property
    def should_stop(self) -> bool: ...  # EarlyStopping, Timer: stop at the next chance
    @should_stop.setter
    def should_stop(self, value: bool) -> None: ...
    @property
    def accumulate_grad_batches(self) -> int: ...  # GradientAccumulationScheduler: per epoch
    @accumulate_grad_batches.setter
    def accumulate_grad_batches(self, value: int) -> None: ...

    # ---- loop position and stage ----------------------------------------------------------------
    @property
    def current_epoch(self) -> int: ...
    @property
    def global_step(self) -> int: ...
    @property
    def sanity_checking(self) -> bool: ...
    @property
    def state(self) -> TrainerState: ...  # fn: 'fit', 'validate', 'test' or 'predict'
    @property
    def training(self) -> bool: ...
    @property
    def validating(self) -> bool: ...
    @property
    def testing(self) -> bool: ...
    @property
    def predicting(self) -> bool: ...
    @property
    def is_final_epoch(self) -> bool: ...
    @property
    def num_training_batches(self) -> int | float: ...
    @property
    def num_training_batches_seen(self) -> int: ...  # batches the last epoch actually ran
    @property
    def num_eval_batches(self) -> int: ...
    @property
    def estimated_stepping_batches(self) -> int | float: ...
    @property
    def preempted(self) -> str | None: ...
    @property
    def fit_done(self) -> bool: ...

    # ---- loop limits (frozen for the run) -------------------------------------------------------
    @property
    def max_epochs(self) -> int | float: ...
    @property
    def min_epochs(self) -> int: ...
    @property
    def max_steps(self) -> int: ...
    @property
    def min_steps(self) -> int: ...
    @property
    def limit_train_batches(self) -> int | float: ...
    @property
    def limit_val_batches(self) -> int | float: ...
    @property
    def limit_test_batches(self) -> int | float: ...
    @property
    def limit_predict_batches(self) -> int | float: ...
    @property
    def val_check_interval(self) -> int | float: ...
    @property
    def check_val_every_n_epoch(self) -> int | None: ...
    @property
    def num_sanity_val_steps(self) -> int: ...
    @property
    def gradient_clip_val(self) -> float | None: ...
    @property
    def gradient_clip_algorithm(self) -> str: ...
    @property
    def log_every_n_steps(self) -> int: ...

    # ---- what runs, where -----------------------------------------------------------------------
    @property
    def lightning_module(self) -> TrainModule: ...
    @property
    def model(self) -> TrainModule | None: ...
    @property
    def datamodule(self) -> DataModule | None: ...
    @property
    def strategy(self) -> Strategy: ...
    @property
    def precision_plugin(self) -> Precision: ...
    @property
    def profiler(self) -> Profiler: ...
    @property
    def world_size(self) -> int: ...
    @property
    def global_rank(self) -> int: ...
    @property
    def local_rank(self) -> int: ...
    @property
    def node_rank(self) -> int: ...
    @property
    def is_global_zero(self) -> bool: ...
    @property
    def optimizers(self) -> list[torch.optim.Optimizer]: ...
    @property
    def lr_scheduler_configs(self) -> list[SchedulerConfig]: ...
    @property
    def predict_loop(self) -> Any: ...  # the latest predict's predictions and batch indices
    @property
    def train_loader(self) -> Any: ...  # the user's loader (any iterable), as prepared
    @property
    def val_loaders(self) -> list[Any]: ...
    @property
    def train_dataloader(self) -> Any: ...  # Lightning's names for the two above
    @property
    def val_dataloaders(self) -> Any: ...
    @property
    def callbacks(self) -> list[Any]: ...  # Callbacks: naming the class here would be a circle
    @property
    def checkpoint_callback(self) -> Any: ...  # the first ModelCheckpoint (None: none), likewise

    # ---- metrics, loggers, files ----------------------------------------------------------------
    @property
    def callback_metrics(self) -> dict[str, torch.Tensor | float]: ...
    @property
    def progress_bar_metrics(self) -> dict[str, Any]: ...
    @property
    def loggers(self) -> list[Logger]: ...
    @property
    def logger(self) -> Logger | None: ...  # the first logger
    @property
    def log_dir(self) -> str: ...
    def log_to_loggers(self, metrics: dict[str, float], step: int) -> None: ...
    def save_checkpoint(self, filepath: str, weights_only: bool = False) -> None: ...

    # ---- the run state (what LearningRateMonitor and ModelCheckpoint's file helpers reach) -------
    @property
    def run_state(self) -> RunState: ...  # its metric hub, its CheckpointIO
