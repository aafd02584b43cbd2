"""The Trainer's Lightning-named read-outs, grouped by concept; each reads the run state the
Trainer owns. They are plain properties that the ``Trainer`` class body lists by name
(``current_epoch = readouts.current_epoch``): no mixin, nothing attached at import."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, cast

import torch

from trainkit.callbacks.base import Callback
from trainkit.datamodule import DataModule
from trainkit.loggers.base import Logger
from trainkit.module import TrainModule
from trainkit.optim import SchedulerConfig
from trainkit.profilers import Profiler
from trainkit.state import RunState
from trainkit.strategies import Strategy
from trainkit.strategies.precision import Precision
from trainkit.trainer.settings import StageSettings

if TYPE_CHECKING:
    from trainkit.callbacks.checkpoint import ModelCheckpoint
    from trainkit.callbacks.early_stopping import EarlyStopping
    from trainkit.callbacks.progress import ProgressBar


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
def received_sigterm(self: OwnsRunState) -> bool:
    """Whether a SIGTERM arrived: held by the stop-signal handlers now, or the one that stopped
    the fit."""
    import signal

    from trainkit.distributed.signals import held_stop_signal

    sigterm = signal.SIGTERM
    return held_stop_signal() == sigterm or self.run_state.stop.preempted == sigterm.name


@property
def ckpt_path(self: OwnsRunState) -> str | None:
    """The checkpoint the running or last stage loaded; set it to load that checkpoint in the
    stages that follow (until set to None; a stage's own ``ckpt_path`` takes precedence)."""
    return self.run_state.ckpt_path


@ckpt_path.setter
def ckpt_path(self: OwnsRunState, path: str | None) -> None:
    self.run_state.ckpt_path = self.run_state.chosen_ckpt_path = path


@property
def fit_done(self: OwnsRunState) -> bool:
    return self.run_state.fit_done


@property
def is_final_epoch(self: OwnsRunState) -> bool:
    """Whether the epoch now ending is the last one of this fit."""
    return self.run_state.is_final_epoch


# ---- what runs ----------------------------------------------------------------------------------
@property
def lightning_module(self: OwnsRunState) -> TrainModule:
    # None before a stage attached a module; typed as Lightning types it, for the callbacks
    return cast("TrainModule", self.run_state.module)


@property
def model(self: OwnsRunState) -> TrainModule | None:
    return self.run_state.module


@property
def datamodule(self: OwnsRunState) -> DataModule | None:
    return self.run_state.datamodule


@property
def optimizers(self: OwnsRunState) -> list[torch.optim.Optimizer]:
    return self.run_state.optimizers


@optimizers.setter
def optimizers(self: OwnsRunState, optimizers: list[torch.optim.Optimizer]) -> None:
    self.run_state.optimizers = list(optimizers)


@property
def lr_scheduler_configs(self: OwnsRunState) -> list[SchedulerConfig]:
    return self.run_state.lr_scheduler_configs


@property
def predict_loop(self: OwnsRunState) -> Any:
    """The latest predict's loop: ``predictions``, ``epoch_batch_indices``,
    ``current_batch_indices`` (None before a predict)."""
    return self.run_state.predict_loop


@property
def precision_plugin(self: OwnsRunState) -> Precision:
    return self.run_state.precision


@property
def scaler(self: OwnsRunState) -> torch.amp.GradScaler | None:
    """The gradient scaler of 16-mixed precision (None otherwise)."""
    return self.run_state.precision.scaler


@property
def callbacks(self: OwnsRunState) -> list[Callback]:
    return self.run_state.callbacks


@property
def loggers(self: OwnsRunState) -> list[Logger]:
    return self.run_state.loggers


@loggers.setter
def loggers(self: OwnsRunState, loggers: list[Logger] | None) -> None:
    self.run_state.loggers = list(loggers) if loggers else []


@property
def logger(self: OwnsRunState) -> Logger | None:
    loggers = self.run_state.loggers
    return loggers[0] if loggers else None


@logger.setter
def logger(self: OwnsRunState, logger: Logger | None) -> None:
    self.run_state.loggers = [] if logger is None else [logger]


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
def checkpoint_callbacks(self: OwnsRunState) -> list[Callback]:
    """Every callback that writes checkpoints (ModelCheckpoint, OnExceptionCheckpoint...)."""
    from trainkit.callbacks.base import Checkpoint

    return [cb for cb in self.run_state.callbacks if isinstance(cb, Checkpoint)]


@property
def early_stopping_callbacks(self: OwnsRunState) -> list[EarlyStopping]:
    from trainkit.callbacks.early_stopping import EarlyStopping

    return [cb for cb in self.run_state.callbacks if isinstance(cb, EarlyStopping)]


@property
def early_stopping_callback(self: OwnsRunState) -> EarlyStopping | None:
    from trainkit.callbacks.early_stopping import EarlyStopping

    return next((cb for cb in self.run_state.callbacks if isinstance(cb, EarlyStopping)), None)


@property
def progress_bar_callback(self: OwnsRunState) -> ProgressBar | None:
    from trainkit.callbacks.progress import ProgressBar

    return next((cb for cb in self.run_state.callbacks if isinstance(cb, ProgressBar)), None)


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


@property
def device_ids(self: OwnsRunState) -> list[int]:
    """The ids of the devices this node runs on (process slots on CPU)."""
    return list(self.settings.selection.ids)


@property
def num_devices(self: OwnsRunState) -> int:
    return self.settings.selection.count


@property
def distributed_sampler_kwargs(self: OwnsRunState) -> dict[str, int] | None:
    """``num_replicas``/``rank`` of the DistributedSampler (None when not distributed)."""
    return self.run_state.strategy.distributed_sampler_kwargs()


# ---- metrics ------------------------------------------------------------------------------------
@property
def callback_metrics(self: OwnsRunState) -> dict[str, torch.Tensor | float]:
    """Latest step values and epoch aggregates, by name; what monitors read."""
    return self.run_state.metrics.callback_metrics


@property
def progress_bar_metrics(self: OwnsRunState) -> dict[str, Any]:
    return self.run_state.metrics.progress_bar_metrics


@property
def logged_metrics(self: OwnsRunState) -> dict[str, float]:
    """The latest value of each metric sent to the loggers."""
    return self.run_state.metrics.logged_metrics


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


@property
def stalled_attempts(self: OwnsRunState) -> int:
    """Resumed attempts in a row (this one counted) that trained too few steps: a requeued
    job whose start-up eats its time window (the requeue bound reads it)."""
    from trainkit.distributed.slurm import requeue_min_steps

    return self.run_state.stop.stalled_now(self.run_state.position.global_step, requeue_min_steps())
