"""The Trainer's Lightning-named read-outs, grouped by concept; each reads the run state the
Trainer owns. They are plain properties that the ``Trainer`` class body lists by name
(``current_epoch = readouts.current_epoch``): no mixin, nothing attached at import."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any, Protocol

import torch

from trainkit.callbacks.base import Callback
from trainkit.datamodule import DataModule
from trainkit.loggers.base import Logger
from trainkit.loops.state import RunState
from trainkit.module import TrainModule
from trainkit.optim import SchedulerConfig
from trainkit.profilers import Profiler
from trainkit.strategies import Strategy
from trainkit.strategies.precision import Precision
from trainkit.trainer.settings import StageSettings

if TYPE_CHECKING:
    from trainkit.callbacks.checkpoint import ModelCheckpoint


class OwnsRunState(Protocol):
    """What the read-outs need of the Trainer: its run state, settings and root folder."""

    run_state: RunState
    settings: StageSettings
    default_root_dir: str


def find_checkpoint_callback(callbacks: list[Callback]) -> ModelCheckpoint | None:
    """The first ``ModelCheckpoint`` among ``callbacks`` (Lightning's ``checkpoint_callback``)."""
    from trainkit.callbacks.checkpoint import ModelCheckpoint

    return next((cb for cb in callbacks if isinstance(cb, ModelCheckpoint)), None)


# ---- loop position and stop state ---------------------------------------------------------------
@property
def current_epoch(self: OwnsRunState) -> int:
    return self.run_state.position.epoch


@property
def global_step(self: OwnsRunState) -> int:
    """Optimizer steps taken (all epochs)."""
    return self.run_state.position.global_step


@property
def num_training_batches(self: OwnsRunState) -> int | float:
    return self.run_state.position.epoch_batches


@property
def num_training_batches_seen(self: OwnsRunState) -> int:
    return self.run_state.position.batches_seen


@property
def num_eval_batches(self: OwnsRunState) -> int:
    return self.run_state.num_eval_batches


@property
def should_stop(self: OwnsRunState) -> bool:
    return self.run_state.stop.should_stop


@should_stop.setter
def should_stop(self: OwnsRunState, value: bool) -> None:
    self.run_state.stop.should_stop = bool(value)


@property
def preempted(self: OwnsRunState) -> str | None:
    """The stop signal's name once fit saved a checkpoint and stopped early, else None."""
    return self.run_state.stop.preempted


@property
def fit_done(self: OwnsRunState) -> bool:
    return self.run_state.fit_done


@property
def is_final_epoch(self: OwnsRunState) -> bool:
    """Whether the epoch now ending is the last one of this fit."""
    return self.run_state.is_final_epoch


@property
def sanity_checking(self: OwnsRunState) -> bool:
    return self.run_state.sanity_checking


@property
def state(self: OwnsRunState) -> str | None:
    """The stage running or last run: 'fit', 'validate', 'test' or 'predict'."""
    return self.run_state.stage


# ---- what runs ----------------------------------------------------------------------------------
@property
def lightning_module(self: OwnsRunState) -> TrainModule:
    return self.run_state.module


@property
def model(self: OwnsRunState) -> TrainModule | None:
    return self.run_state.module


@property
def datamodule(self: OwnsRunState) -> DataModule | None:
    return self.run_state.datamodule


@property
def optimizers(self: OwnsRunState) -> list[torch.optim.Optimizer]:
    return self.run_state.optimizers


@property
def lr_scheduler_configs(self: OwnsRunState) -> list[SchedulerConfig]:
    return self.run_state.lr_scheduler_configs


@property
def predict_loop(self: OwnsRunState) -> Any:
    """The latest predict's loop: ``predictions``, ``epoch_batch_indices``,
    ``current_batch_indices`` (None before a predict)."""
    return self.run_state.predict_loop


@property
def train_loader(self: OwnsRunState) -> Any:
    return self.run_state.train_loader


@property
def val_loaders(self: OwnsRunState) -> list[Any]:
    return self.run_state.val_loaders


@property
def train_dataloader(self: OwnsRunState) -> Any:
    """The fit's training DataLoader (Lightning's name), as the strategy prepared it."""
    return self.run_state.train_loader


@property
def val_dataloaders(self: OwnsRunState) -> Any:
    """The fit's validation DataLoader, or a list of them when there are several."""
    loaders = self.run_state.val_loaders
    return loaders[0] if len(loaders) == 1 else loaders or None


@property
def precision_plugin(self: OwnsRunState) -> Precision:
    return self.run_state.precision


@property
def callbacks(self: OwnsRunState) -> list[Callback]:
    return self.run_state.callbacks


@property
def loggers(self: OwnsRunState) -> list[Logger]:
    return self.run_state.loggers


@property
def logger(self: OwnsRunState) -> Logger | None:
    loggers = self.run_state.loggers
    return loggers[0] if loggers else None


@property
def profiler(self: OwnsRunState) -> Profiler:
    return self.run_state.profiler


@property
def cli_config(self: OwnsRunState) -> str | None:
    """The resolved config a CLI run records in its log folder and checkpoints."""
    return self.run_state.cli_config


@cli_config.setter
def cli_config(self: OwnsRunState, text: str | None) -> None:
    self.run_state.cli_config = text


@property
def checkpoint_callback(self: OwnsRunState) -> ModelCheckpoint | None:
    return find_checkpoint_callback(self.run_state.callbacks)


@property
def log_dir(self: OwnsRunState) -> str:
    return self.run_state.log_dir or self.default_root_dir


# ---- ranks --------------------------------------------------------------------------------------
@property
def strategy(self: OwnsRunState) -> Strategy:
    """The strategy this run uses (owned by the run state)."""
    return self.run_state.strategy


@property
def world_size(self: OwnsRunState) -> int:
    return self.run_state.strategy.world_size


@property
def global_rank(self: OwnsRunState) -> int:
    return self.run_state.strategy.global_rank


@property
def local_rank(self: OwnsRunState) -> int:
    return self.run_state.strategy.local_rank


@property
def node_rank(self: OwnsRunState) -> int:
    return self.run_state.strategy.node_rank


@property
def is_global_zero(self: OwnsRunState) -> bool:
    return self.run_state.strategy.is_global_zero


# ---- metrics ------------------------------------------------------------------------------------
@property
def callback_metrics(self: OwnsRunState) -> dict[str, torch.Tensor | float]:
    """Latest step values and epoch aggregates, by name; what monitors read."""
    return self.run_state.metrics.callback_metrics


@property
def progress_bar_metrics(self: OwnsRunState) -> dict[str, Any]:
    return self.run_state.metrics.progress_bar_metrics


# ---- sizes --------------------------------------------------------------------------------------
@property
def estimated_stepping_batches(self: OwnsRunState) -> int | float:
    """Total optimizer steps this fit will take (for schedulers like OneCycleLR)."""
    from trainkit.data import limited_batches

    limits = self.run_state.limits
    per_epoch = limited_batches(
        self.run_state.train_loader, limits.limit_train_batches, "limit_train_batches"
    )
    return limits.total_steps(per_epoch)


# ---- loop limits (frozen for the run; LoopLimits' fields) ---------------------------------------
@property
def max_epochs(self: OwnsRunState) -> int | float:
    """The Trainer's ``max_epochs`` (frozen for the run)."""
    return self.run_state.limits.max_epochs


@property
def min_epochs(self: OwnsRunState) -> int:
    """The Trainer's ``min_epochs`` (frozen for the run)."""
    return self.run_state.limits.min_epochs


@property
def max_steps(self: OwnsRunState) -> int:
    """The Trainer's ``max_steps`` (frozen for the run)."""
    return self.run_state.limits.max_steps


@property
def min_steps(self: OwnsRunState) -> int:
    """The Trainer's ``min_steps`` (frozen for the run)."""
    return self.run_state.limits.min_steps


@property
def limit_train_batches(self: OwnsRunState) -> int | float:
    """The Trainer's ``limit_train_batches`` (frozen for the run)."""
    return self.run_state.limits.limit_train_batches


@property
def limit_val_batches(self: OwnsRunState) -> int | float:
    """The Trainer's ``limit_val_batches`` (frozen for the run)."""
    return self.run_state.limits.limit_val_batches


@property
def limit_test_batches(self: OwnsRunState) -> int | float:
    """The Trainer's ``limit_test_batches`` (frozen for the run)."""
    return self.run_state.limits.limit_test_batches


@property
def limit_predict_batches(self: OwnsRunState) -> int | float:
    """The Trainer's ``limit_predict_batches`` (frozen for the run)."""
    return self.run_state.limits.limit_predict_batches


@property
def val_check_interval(self: OwnsRunState) -> int | float:
    """The Trainer's ``val_check_interval`` (frozen for the run)."""
    return self.run_state.limits.val_check_interval


@property
def check_val_every_n_epoch(self: OwnsRunState) -> int | None:
    """The Trainer's ``check_val_every_n_epoch`` (frozen for the run)."""
    return self.run_state.limits.check_val_every_n_epoch


@property
def num_sanity_val_steps(self: OwnsRunState) -> int:
    """The Trainer's ``num_sanity_val_steps`` (frozen for the run)."""
    return self.run_state.limits.num_sanity_val_steps


@property
def accumulate_grad_batches(self: OwnsRunState) -> int:
    """The Trainer's ``accumulate_grad_batches``; settable: from the next epoch on (Lightning's
    GradientAccumulationScheduler sets it per epoch)."""
    return self.run_state.limits.accumulate_grad_batches


@accumulate_grad_batches.setter
def accumulate_grad_batches(self: OwnsRunState, value: int) -> None:
    self.run_state.limits = dataclasses.replace(
        self.run_state.limits, accumulate_grad_batches=value
    )


@property
def gradient_clip_val(self: OwnsRunState) -> float | None:
    """The Trainer's ``gradient_clip_val`` (frozen for the run)."""
    return self.run_state.limits.gradient_clip_val


@property
def gradient_clip_algorithm(self: OwnsRunState) -> str:
    """The Trainer's ``gradient_clip_algorithm`` (frozen for the run)."""
    return self.run_state.limits.gradient_clip_algorithm


@property
def log_every_n_steps(self: OwnsRunState) -> int:
    """The Trainer's ``log_every_n_steps`` (frozen for the run)."""
    return self.run_state.limits.log_every_n_steps


@property
def overfit_batches(self: OwnsRunState) -> int | float:
    """The Trainer's ``overfit_batches`` (frozen for the run)."""
    return self.run_state.limits.overfit_batches


@property
def reload_dataloaders_every_n_epochs(self: OwnsRunState) -> int:
    """The Trainer's ``reload_dataloaders_every_n_epochs`` (frozen for the run)."""
    return self.run_state.limits.reload_dataloaders_every_n_epochs
