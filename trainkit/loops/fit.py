"""The fit loop: epochs of training batches, validation at the configured interval, epoch end."""

from __future__ import annotations

import math
import warnings
from collections.abc import Iterable
from dataclasses import replace
from typing import TYPE_CHECKING

from torch import Tensor

from trainkit.checkpoint import state as checkpoint_state
from trainkit.common.hooks import overrides
from trainkit.common.warnings import PossibleUserWarning
from trainkit.data import limited_batches, say_empty_loaders, set_sampler_epoch
from trainkit.distributed import rank_board
from trainkit.distributed.rank_board import DATA, TRAINING_STEP
from trainkit.errors import ConfigError, MisconfigurationError
from trainkit.loops.evaluation import EvalLoop
from trainkit.loops.iterate import batch_transfer, start_iterating
from trainkit.loops.training_step import batch_end_outputs
from trainkit.metrics import MetricStore, to_float
from trainkit.module import TrainModule
from trainkit.seed import collect_rng_states, restore_rng_states
from trainkit.state import RunningStage, RunState, TrainerFn

if TYPE_CHECKING:
    import torch

    from trainkit.optim import SchedulerConfig


def val_every_n_batches(state: RunState) -> int:
    """Training batches between two validations in the current epoch (0: none this epoch)."""
    limits = state.limits
    every_n_epochs = limits.check_val_every_n_epoch
    if not state.given.val_loaders or (
        every_n_epochs and (state.position.epoch + 1) % every_n_epochs
    ):
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


def load_val_batches(state: RunState) -> None:
    """Record the fit's validation batch counts (``trainer.num_val_batches``) where Lightning
    loads its validation loaders: at the sanity check and at the start of a fit whose first
    epoch validates (each validation records them too: loops/evaluation.py)."""
    limit = state.limits.limit_val_batches
    if limit != 0:
        say_empty_loaders(state, "validation", state.given.val_loaders)
    state.loaded_batches[TrainerFn.FITTING] = [
        limited_batches(loader, limit, "limit_val_batches") for loader in state.given.val_loaders
    ]


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
        if config.monitor not in metrics:  # Lightning's class
            raise MisconfigurationError(
                f"ReduceLROnPlateau monitor {config.monitor!r} was not logged; logged: "
                f"{sorted(metrics)}; log it before the scheduler steps, or set 'strict': False "
                "in the lr_scheduler dict to skip such steps"
            )
        metric = to_float(metrics[config.monitor])
    module.lr_scheduler_step(config.scheduler, metric)


def warn_short_logging_interval(state: RunState) -> None:
    """As Lightning, once (rank 0): an epoch shorter than ``log_every_n_steps`` sends the
    loggers no step values (train_loss among them) in that epoch."""
    every = state.limits.log_every_n_steps
    if not state.given.loggers or not state.strategy.is_global_zero:
        return
    loader = state.given.train_loader
    batches = limited_batches(loader, state.limits.limit_train_batches, "limit_train_batches")
    if batches < every:
        warnings.warn(
            f"The number of training batches ({batches}) is smaller than the logging interval "
            f"Trainer(log_every_n_steps={every}). Set a lower value for log_every_n_steps if "
            "you want to see logs for the training epoch (--trainer.log_every_n_steps N)",
            PossibleUserWarning,  # Lightning's category
            stacklevel=2,
        )


class FitLoop:
    """Epochs of training batches, with validation at the configured interval."""

    def __init__(self, state: RunState) -> None:
        self.state = state
        # the epoch now ending ran all its batches (its loader or limit ended it, or
        # on_train_batch_start returned -1): epoch-interval schedulers step only then
        self.ran_all = False

    def run(self) -> None:
        state = self.state
        hooks = state.hooks
        hooks.call("on_fit_start")
        steps = state.limits.num_sanity_val_steps
        # as Lightning: loaders without a validation_step validate nothing (nor run its hooks)
        validates = overrides(state.require_module(), TrainModule, "validation_step")
        if state.given.val_loaders and not validates:
            warnings.warn(  # Lightning's words
                "You passed in a `val_dataloader` but have no `validation_step`. Skipping val loop.",
                UserWarning,
                stacklevel=2,
            )
        if validates and state.given.val_loaders and steps:
            state.trainer_state.stage = RunningStage.SANITY_CHECKING
            # as Lightning: the check draws nothing from the global generators (each loader
            # iterator takes a seed), so the first epoch shuffles as a fit without the check
            rng_states = collect_rng_states()
            try:
                hooks.call("on_sanity_check_start")
                load_val_batches(state)
                EvalLoop(state, "validation").run(
                    state.given.val_loaders, 1.0 if steps == -1 else steps
                )
                hooks.call("on_sanity_check_end")
            finally:
                restore_rng_states(rng_states)
            state.trainer_state.stage = RunningStage.TRAINING
        if state.limits.limit_train_batches != 0:  # as Lightning: 0 skips the training loop
            every = state.limits.check_val_every_n_epoch
            first_validates = every is None or (state.position.epoch + 1) % every == 0
            if validates and state.given.val_loaders and first_validates:
                load_val_batches(state)
            warn_short_logging_interval(state)
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
        if every and state.given.reload_loaders and position.epoch and position.epoch % every == 0:
            reload = state.given.reload_loaders
            state.given = replace(
                state.given, train_loader=reload("train")[0], val_loaders=reload("val")
            )
        loader = state.given.train_loader
        position.cut_short = False
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
        state.trainer_state.stage = RunningStage.VALIDATING
        EvalLoop(state, "validation").run(state.given.val_loaders, state.limits.limit_val_batches)
        state.trainer_state.stage = RunningStage.TRAINING
        state.metrics.active = state.metrics.train_store

    def run_batches(self, loader: Iterable[object], skip: int, store: MetricStore) -> None:
        """The training batches of one epoch, after skipping ``skip`` already trained on."""
        state = self.state
        position = state.position
        module = state.require_module()
        stepper = state.require_stepper()
        to_device = batch_transfer(state.strategy, module, state.given.datamodule)
        start_hooks = state.hooks.bound("on_train_batch_start")
        end_hooks = state.hooks.bound("on_train_batch_end")
        automatic = module.automatic_optimization
        training_step = stepper.run
        manual_step = stepper.forward  # the module steps its own optimizers
        accumulate = state.limits.accumulate_grad_batches
        single = accumulate == 1 or not automatic  # the loss in outputs is not divided
        stepper.set_accumulation(accumulate)
        total = position.epoch_batches
        validates = overrides(module, TrainModule, "validation_step")
        val_every = val_every_n_batches(state) if validates else 0
        # check_val_every_n_epoch None: the interval counts the batches of earlier epochs too
        val_offset = epoch_offset(state) if val_every else 0
        log_every = state.limits.log_every_n_steps if state.given.loggers else 0
        hub = state.metrics
        log_step = hub.log_step
        max_steps = state.limits.max_steps
        preemption = state.preemption
        stop = state.stop
        mark = state.board.mark
        epoch = position.epoch
        # ReduceLROnPlateau-style schedulers of interval 'step' read the metrics: as Lightning,
        # they step after the batch's validation (automatic optimization only)
        metric_steps = (
            [c for c in state.lr_scheduler_configs if c.interval == "step" and c.needs_metric]
            if automatic
            else []
        )
        self.ran_all = False

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
                self.ran_all = True
                break
            mark(TRAINING_STEP, epoch, batch_idx)
            hub.stepped_in_batch = False
            store.new_batch(batch)
            if to_device is not None:
                batch = to_device(batch)
            if start_hooks and any(hook(batch, batch_idx) == -1 for hook in start_hooks):
                self.ran_all = True  # as Lightning: the epoch's last batch
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
            for config in metric_steps if boundary else ():
                if (batch_idx + 1) % config.frequency == 0:  # Lightning counts the epoch's batches
                    step_scheduler(config, hub.callback_metrics, module)
            if batch_idx + 1 >= total:
                self.ran_all = True
            if stopping or 0 <= max_steps <= position.global_step:
                break
            mark(DATA, epoch, batch_idx + 1)
        else:
            self.ran_all = True  # the loader ran out
        position.batches_done = batch_idx + 1

    def finish_epoch(self, store: MetricStore) -> None:
        """Epoch-end hooks, metric aggregates, epoch schedulers, then the monitoring callbacks."""
        state = self.state
        position = state.position
        module = state.require_module()
        state.board.mark(rank_board.EPOCH_END)
        state.metrics.stepped_in_batch = True  # as Lightning: the epoch's end logs a step back
        store.epoch_end_reached = True  # the hooks read the epoch's values so far
        monitors = [cb for cb in state.given.callbacks if getattr(cb, "order", 0) > 0]
        others = [cb for cb in state.given.callbacks if cb not in monitors]
        state.hooks.call_callbacks("on_train_epoch_end", only=others)
        store.default_on_step, store.default_on_epoch = False, True
        module.on_train_epoch_end()
        state.metrics.reduce_train_epoch(store)
        # as Lightning: schedulers step by themselves under automatic optimization only, and
        # the epoch-interval ones only after an epoch that ran all its batches
        stepping = self.ran_all and module.automatic_optimization
        missing: MisconfigurationError | None = None
        for config in state.lr_scheduler_configs if stepping else ():
            if config.interval == "epoch" and (position.epoch + 1) % config.frequency == 0:
                try:
                    step_scheduler(config, state.metrics.callback_metrics, module)
                except MisconfigurationError as error:  # a monitor not logged
                    missing = missing or error
        state.hooks.call_callbacks("on_train_epoch_end", only=monitors)
        if missing is not None:  # as Lightning: after the monitoring callbacks saved and checked
            raise missing
        for logger in state.given.loggers if state.strategy.is_global_zero else ():
            logger.save()
        state.metrics.stepped_in_batch = False  # later records: at every batch stepped
        if not self.ran_all and 0 <= state.limits.max_steps <= position.global_step:
            # max_steps ended the fit inside the epoch: counted as Lightning counts it, yet a
            # resumed fit (with a larger max_steps) finishes it (LoopPosition.state_dict)
            position.cut_short = True
        else:
            position.epoch += 1
