"""The fit loop: epochs of training batches, validation at the configured interval, epoch end."""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable
from typing import TYPE_CHECKING

from torch import Tensor

from trainkit.callbacks.base import overrides
from trainkit.checkpoint import state as checkpoint_state
from trainkit.data import limited_batches, set_sampler_epoch
from trainkit.distributed import rank_board
from trainkit.distributed.rank_board import DATA, TRAINING_STEP
from trainkit.errors import ConfigError, MisconfigurationError
from trainkit.loops.evaluation import EvalLoop
from trainkit.loops.iterate import batch_transfer, start_iterating
from trainkit.loops.training_step import batch_end_outputs
from trainkit.metrics import MetricStore, to_float
from trainkit.module import TrainModule
from trainkit.seed import collect_rng_states, restore_rng_states
from trainkit.state import RunState

if TYPE_CHECKING:
    import torch

    from trainkit.optim import SchedulerConfig


def val_every_n_batches(state: RunState) -> int:
    """Training batches between two validations in the current epoch (0: none this epoch)."""
    limits = state.limits
    every_n_epochs = limits.check_val_every_n_epoch
    if not state.val_loaders or (every_n_epochs and (state.position.epoch + 1) % every_n_epochs):
        return 0
    total = state.position.epoch_batches
    interval = limits.val_check_interval
    if every_n_epochs is None:  # counted across epochs (see run_batches): an int, as checked by
        return int(interval)  # trainer/arguments.py
    if isinstance(interval, int):
        if interval > total:
            raise ConfigError(
                "trainer.val_check_interval",
                interval,
                f"at most the {total} training batches of an epoch",
                "or a float fraction of the epoch",
            )
        return interval
    if total == math.inf:
        raise MisconfigurationError(
            "val_check_interval as a fraction needs a sized train loader; use an int"
        )
    return max(1, int(total * interval))


def epoch_offset(state: RunState) -> int:
    """Training batches of the epochs before this one, when validation counts across epochs."""
    position = state.position
    if state.limits.check_val_every_n_epoch is not None or position.epoch_batches == math.inf:
        return 0
    return position.epoch * int(position.epoch_batches)  # a count: it is not inf here


def step_scheduler(
    config: SchedulerConfig, metrics: dict[str, torch.Tensor | float], module: TrainModule
) -> None:
    """Step one scheduler through the module's ``lr_scheduler_step``; ReduceLROnPlateau-style
    ones get their monitored metric."""
    metric = None
    if config.needs_metric:
        if config.monitor not in metrics and not config.strict:
            warnings.warn(
                f"lr_scheduler monitor {config.monitor!r} was not logged (logged: "
                f"{sorted(metrics)}); the scheduler skips this step (strict=False)",
                RuntimeWarning,
            )
            return
        if config.monitor not in metrics:
            raise KeyError(
                f"lr_scheduler monitor {config.monitor!r} was not logged; logged: {sorted(metrics)}"
            )
        metric = to_float(metrics[config.monitor])
    module.lr_scheduler_step(config.scheduler, metric)


class FitLoop:
    """Epochs of training batches, with validation at the configured interval."""

    def __init__(self, state: RunState) -> None:
        self.state = state

    def run(self) -> None:
        state = self.state
        hooks = state.hooks
        hooks.call("on_fit_start")
        steps = state.limits.num_sanity_val_steps
        if state.val_loaders and steps:
            state.running_stage = "sanity_check"
            # as Lightning: the check draws nothing from the global generators (each loader
            # iterator takes a seed), so the first epoch shuffles as a fit without the check
            rng_states = collect_rng_states()
            try:
                hooks.call("on_sanity_check_start")
                EvalLoop(state, "validation").run(state.val_loaders, 1.0 if steps == -1 else steps)
                hooks.call("on_sanity_check_end")
            finally:
                restore_rng_states(rng_states)
            state.running_stage = "train"
        self.train()
        if state.stop.preempted is None:  # a preempted fit has not ended: it resumes later
            hooks.call("on_fit_end")

    def train(self) -> None:
        """The training epochs, from ``on_train_start`` to ``on_train_end`` (also what a tuner's
        trial runs, inside a fit that has started)."""
        state = self.state
        checkpoint_state.restore_rng(state)
        state.hooks.call("on_train_start")
        while not state.fit_done:
            self.run_epoch()
        if state.stop.preempted is None:
            state.hooks.call("on_train_end")

    def run_epoch(self) -> None:
        state = self.state
        position = state.position
        every = state.limits.reload_dataloaders_every_n_epochs
        if every and state.reload_loaders and position.epoch and position.epoch % every == 0:
            state.train_loader = state.reload_loaders("train")[0]
            state.val_loaders = state.reload_loaders("val")
        loader = state.train_loader
        set_sampler_epoch(loader, position.epoch)
        position.epoch_batches = limited_batches(
            loader, state.limits.limit_train_batches, "limit_train_batches"
        )
        state.epoch_start_rng = collect_rng_states()
        store = state.metrics.new_train_store()
        state.require_module().train()
        state.hooks.call("on_train_epoch_start")
        skip = checkpoint_state.batches_to_skip(state)
        if skip:
            checkpoint_state.restore_epoch_metrics(state, store)
        position.phase = "batches"
        self.run_batches(loader, skip, store)
        position.batches_seen = position.batches_done
        if state.stop.preempted is None:
            position.phase = "end"
            self.finish_epoch(store)
        position.phase = None

    def run_validation(self) -> None:
        state = self.state
        state.board.mark(rank_board.VALIDATION)
        module = state.require_module()
        if overrides(module, TrainModule, "on_validation_model_zero_grad"):
            module.on_validation_model_zero_grad()  # not by default: see docs/compat.md
        state.running_stage = "validate"
        EvalLoop(state, "validation").run(state.val_loaders, state.limits.limit_val_batches)
        state.running_stage = "train"
        state.metrics.active = state.metrics.train_store

    def run_batches(self, loader: Iterable[object], skip: int, store: MetricStore) -> None:
        """The training batches of one epoch, after skipping ``skip`` already trained on."""
        state = self.state
        position = state.position
        module = state.require_module()
        stepper = state.require_stepper()
        to_device = batch_transfer(state.strategy, module, state.datamodule)
        start_hooks = state.hooks.bound("on_train_batch_start")
        end_hooks = state.hooks.bound("on_train_batch_end")
        automatic = module.automatic_optimization
        training_step = stepper.run
        manual_step = stepper.forward  # the module steps its own optimizers
        accumulate = state.limits.accumulate_grad_batches
        single = accumulate == 1 or not automatic  # the loss in outputs is not divided
        stepper.set_accumulation(accumulate)
        total = position.epoch_batches
        val_every = val_every_n_batches(state)
        # check_val_every_n_epoch None: the interval counts the batches of earlier epochs too
        val_offset = epoch_offset(state) if val_every else 0
        log_every = state.limits.log_every_n_steps if state.loggers else 0
        hub = state.metrics
        log_step = hub.log_step
        max_steps = state.limits.max_steps
        preemption = state.preemption
        stop = state.stop
        mark = state.board.mark
        epoch = position.epoch

        iterator = start_iterating(loader, preemption)
        for _ in range(skip):
            next(iterator)
        position.batches_done = skip
        if skip:
            checkpoint_state.restore_rng(state, after_skip=True)
            # a validation due at the skipped batch ran after the checkpoint was taken
            if val_every and (val_offset + skip) % val_every == 0:
                self.run_validation()
        batch_idx = skip - 1
        for batch_idx, batch in enumerate(iterator, start=skip):
            if batch_idx >= total:
                batch_idx -= 1
                break
            mark(TRAINING_STEP, epoch, batch_idx)
            hub.stepped_in_batch = False
            store.new_batch(batch)
            if to_device is not None:
                batch = to_device(batch)
            if start_hooks and any(hook(batch, batch_idx) == -1 for hook in start_hooks):
                break
            if automatic:
                boundary = (batch_idx + 1) % accumulate == 0 or batch_idx + 1 == total
                output = training_step(batch, batch_idx, boundary)
            else:
                boundary = True
                output = manual_step(batch, batch_idx)
            if boundary:  # a manually optimized module's optimizers count their own steps
                if automatic:
                    position.global_step += 1
                position.batches_stepped += 1
                hub.stepped_in_batch = True  # the loggers count it once the batch has ended
            position.batches_done = batch_idx + 1
            if end_hooks:  # Lightning's outputs: a dict with the detached loss
                outputs = (
                    {"loss": output.detach()}  # the common case, without a call
                    if single and isinstance(output, Tensor)
                    else batch_end_outputs(output, accumulate if automatic else 1)
                )
                for hook in end_hooks:
                    hook(outputs, batch, batch_idx)
            # as Lightning: after the batch-end hooks, every N stepped batches and once a stop
            # is asked for
            if (
                log_every
                and boundary
                and (position.batches_stepped % log_every == 0 or stop.should_stop)
            ):
                log_step(store)
            if preemption is not None and preemption.should_stop(not automatic or boundary):
                preemption.save_and_stop()
                break
            stopping = stop.should_stop and state.min_trained
            # as Lightning: a stop asked for mid-epoch validates first (when this epoch does)
            if val_every and (stopping or (val_offset + batch_idx + 1) % val_every == 0):
                self.run_validation()
                stopping = stop.should_stop and state.min_trained
            if stopping or 0 <= max_steps <= position.global_step:
                break
            mark(DATA, epoch, batch_idx + 1)
        position.batches_done = batch_idx + 1

    def finish_epoch(self, store: MetricStore) -> None:
        """Epoch-end hooks, metric aggregates, epoch schedulers, then the monitoring callbacks."""
        state = self.state
        position = state.position
        module = state.require_module()
        state.board.mark(rank_board.EPOCH_END)
        state.metrics.stepped_in_batch = True  # as Lightning: the epoch's end logs a step back
        monitors = [cb for cb in state.callbacks if getattr(cb, "order", 0) > 0]
        others = [cb for cb in state.callbacks if cb not in monitors]
        state.hooks.call_callbacks("on_train_epoch_end", only=others)
        store.default_on_step, store.default_on_epoch = False, True
        module.on_train_epoch_end()
        state.metrics.reduce_train_epoch(store)
        max_steps = state.limits.max_steps
        completed = position.batches_seen >= position.epoch_batches or not (
            0 <= max_steps <= position.global_step
        )
        for config in state.lr_scheduler_configs if completed else ():
            if config.interval == "epoch" and (position.epoch + 1) % config.frequency == 0:
                step_scheduler(config, state.metrics.callback_metrics, module)
        state.hooks.call_callbacks("on_train_epoch_end", only=monitors)
        for logger in state.loggers if state.strategy.is_global_zero else ():
            logger.save()
        state.metrics.stepped_in_batch = False  # later records: at every batch stepped
        if completed:  # an epoch cut short by max_steps is resumed, not counted
            position.epoch += 1
