"""The Trainer's Lightning-named read-outs, each read from the run state it owns."""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from trainkit.loops.state import LoopLimits, RunState
from trainkit.scaling import effective_batch_size


class TrainerProperties:
    """Mixed into Trainer: properties callbacks and users read (``trainer.current_epoch``...)."""

    run_state: RunState
    num_nodes: int
    default_root_dir: str

    # ---- loop position and stop state -----------------------------------------------------------
    @property
    def current_epoch(self) -> int:
        return self.run_state.position.epoch

    @property
    def global_step(self) -> int:
        """Optimizer steps taken (all epochs)."""
        return self.run_state.position.global_step

    @property
    def num_training_batches(self) -> int | float:
        return self.run_state.position.epoch_batches

    @property
    def num_training_batches_seen(self) -> int:
        return self.run_state.position.batches_seen

    @property
    def num_eval_batches(self) -> int:
        return self.run_state.num_eval_batches

    @property
    def should_stop(self) -> bool:
        return self.run_state.stop.should_stop

    @should_stop.setter
    def should_stop(self, value: bool) -> None:
        self.run_state.stop.should_stop = bool(value)

    @property
    def preempted(self) -> str | None:
        """The stop signal's name once fit saved a checkpoint and stopped early, else None."""
        return self.run_state.stop.preempted

    @property
    def fit_done(self) -> bool:
        return self.run_state.fit_done

    @property
    def is_final_epoch(self) -> bool:
        """Whether the epoch now ending is the last one of this fit."""
        return self.run_state.is_final_epoch

    @property
    def sanity_checking(self) -> bool:
        return self.run_state.sanity_checking

    @property
    def state(self) -> str | None:
        """The stage running or last run: 'fit', 'validate', 'test' or 'predict'."""
        return self.run_state.stage

    # ---- what runs ------------------------------------------------------------------------------
    @property
    def lightning_module(self) -> Any:
        return self.run_state.module

    @property
    def model(self) -> Any:
        return self.run_state.module

    @property
    def datamodule(self) -> Any:
        return self.run_state.datamodule

    @property
    def optimizers(self) -> list[torch.optim.Optimizer]:
        return self.run_state.optimizers

    @property
    def lr_scheduler_configs(self) -> list[Any]:
        return self.run_state.lr_scheduler_configs

    @property
    def train_loader(self) -> Any:
        return self.run_state.train_loader

    @property
    def val_loaders(self) -> list[Any]:
        return self.run_state.val_loaders

    @property
    def train_dataloader(self) -> Any:
        """The fit's training DataLoader (Lightning's name), as the strategy prepared it."""
        return self.run_state.train_loader

    @property
    def val_dataloaders(self) -> Any:
        """The fit's validation DataLoader, or a list of them when there are several."""
        loaders = self.run_state.val_loaders
        return loaders[0] if len(loaders) == 1 else loaders or None

    @property
    def precision_plugin(self) -> Any:
        return self.run_state.precision

    @property
    def callbacks(self) -> list[Any]:
        return self.run_state.callbacks

    @property
    def loggers(self) -> list[Any]:
        return self.run_state.loggers

    @property
    def logger(self) -> Any:
        return self.loggers[0] if self.loggers else None

    @property
    def profiler(self) -> Any:
        return self.run_state.profiler

    @property
    def cli_config(self) -> str | None:
        """The resolved config a CLI run records in its log folder and checkpoints."""
        return self.run_state.cli_config

    @cli_config.setter
    def cli_config(self, text: str | None) -> None:
        self.run_state.cli_config = text

    @property
    def checkpoint_callback(self) -> Any:
        from trainkit.callbacks.checkpoint import ModelCheckpoint

        return next((cb for cb in self.callbacks if isinstance(cb, ModelCheckpoint)), None)

    @property
    def log_dir(self) -> str:
        return self.run_state.log_dir or self.default_root_dir

    # ---- ranks ----------------------------------------------------------------------------------
    @property
    def strategy(self) -> Any:
        """The strategy this run uses (owned by the run state)."""
        return self.run_state.strategy

    @property
    def world_size(self) -> int:
        return self.strategy.world_size

    @property
    def global_rank(self) -> int:
        return self.strategy.global_rank

    @property
    def local_rank(self) -> int:
        return self.strategy.local_rank

    @property
    def node_rank(self) -> int:
        return self.strategy.node_rank

    @property
    def is_global_zero(self) -> bool:
        return self.strategy.is_global_zero

    # ---- metrics --------------------------------------------------------------------------------
    @property
    def callback_metrics(self) -> dict[str, torch.Tensor]:
        """Latest step values and epoch aggregates, by name; what monitors read."""
        return self.run_state.metrics.callback_metrics

    @property
    def progress_bar_metrics(self) -> dict[str, Any]:
        return self.run_state.metrics.progress_bar_metrics

    def log_to_loggers(self, metrics: dict[str, float], step: int) -> None:
        """Send floats to every logger (global rank 0 only)."""
        self.run_state.metrics.log_to_loggers(metrics, step)

    # ---- sizes ----------------------------------------------------------------------------------
    @property
    def effective_batch_size(self) -> int | None:
        """Samples per optimizer step across every rank (None before the train loader is known)."""
        batch = getattr(self.train_loader, "batch_size", None)
        if batch is None:
            return None
        devices = self.world_size // self.num_nodes if self.strategy.is_distributed else 1
        accumulate = self.run_state.limits.accumulate_grad_batches
        return effective_batch_size(
            batch, devices, self.num_nodes, accumulate, self.strategy.batch_loading
        )

    @property
    def estimated_stepping_batches(self) -> int | float:
        """Total optimizer steps this fit will take (for schedulers like OneCycleLR)."""
        from trainkit.data import limited_batches

        limits = self.run_state.limits
        per_epoch = limited_batches(
            self.train_loader, limits.limit_train_batches, "limit_train_batches"
        )
        return limits.total_steps(per_epoch)


def _limit_property(name: str) -> property:
    def read(self: TrainerProperties) -> Any:
        return getattr(self.run_state.limits, name)

    read.__doc__ = f"The Trainer's ``{name}`` (frozen for the run)."
    return property(read)


for _field in dataclasses.fields(LoopLimits):  # max_epochs, limit_val_batches, ...
    setattr(TrainerProperties, _field.name, _limit_property(_field.name))


def _set_accumulation(self: TrainerProperties, value: int) -> None:
    """From the next epoch on (Lightning's GradientAccumulationScheduler sets it per epoch)."""
    self.run_state.limits = dataclasses.replace(
        self.run_state.limits, accumulate_grad_batches=value
    )


TrainerProperties.accumulate_grad_batches = property(  # type: ignore[attr-defined]
    TrainerProperties.accumulate_grad_batches.fget,
    _set_accumulation,  # type: ignore[attr-defined]
)
