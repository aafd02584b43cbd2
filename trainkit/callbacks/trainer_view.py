"""What the built-in callbacks read from the Trainer their hooks receive, as a Protocol: the
callbacks never import the Trainer (nothing below ``trainer/`` does), and the Trainer's
Lightning-named read-outs (``trainer/properties.py``) satisfy it.

A leaf: the types it names are imported for type checkers only, from modules that never import
the callbacks. ``Callback``'s hooks receive a ``TrainerView``: a user's callback that reads other
Trainer members annotates its hooks' ``trainer`` with the Trainer class (or ``Any``) itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import torch

    from trainkit.loggers.base import Logger
    from trainkit.loops.state import RunState
    from trainkit.optim import SchedulerConfig
    from trainkit.strategies.base import Strategy


class TrainerView(Protocol):
    """The Trainer's public members that callbacks use (Lightning's names)."""

    fast_dev_run: int

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
    def state(self) -> str | None: ...  # 'fit', 'validate', 'test' or 'predict'
    @property
    def is_final_epoch(self) -> bool: ...
    @property
    def num_training_batches(self) -> int | float: ...
    @property
    def num_training_batches_seen(self) -> int: ...  # batches the last epoch actually ran
    @property
    def num_eval_batches(self) -> int: ...

    # ---- loop limits (frozen for the run) -------------------------------------------------------
    @property
    def max_epochs(self) -> int | float: ...
    @property
    def val_check_interval(self) -> int | float: ...
    @property
    def check_val_every_n_epoch(self) -> int | None: ...
    @property
    def log_every_n_steps(self) -> int: ...

    # ---- what runs, where -----------------------------------------------------------------------
    @property
    def strategy(self) -> Strategy: ...
    @property
    def world_size(self) -> int: ...
    @property
    def global_rank(self) -> int: ...
    @property
    def is_global_zero(self) -> bool: ...
    @property
    def optimizers(self) -> list[torch.optim.Optimizer]: ...
    @property
    def lr_scheduler_configs(self) -> list[SchedulerConfig]: ...
    @property
    def train_loader(self) -> Any: ...  # the user's loader (any iterable), as prepared
    @property
    def val_loaders(self) -> list[Any]: ...

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
