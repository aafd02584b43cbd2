"""The fit, evaluation and predict loops; they call hooks and the strategy, nothing else."""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import torch

from trainkit.callbacks.base import Callback, overrides
from trainkit.checkpoint import state as checkpoint_state
from trainkit.data import limited_batches, set_sampler_epoch
from trainkit.distributed import rank_board
from trainkit.distributed.fork_safety import forks_workers, let_collective_threads_leave_python
from trainkit.distributed.rank_board import DATA, TRAINING_STEP
from trainkit.metrics import MetricStore, to_float
from trainkit.module import HooksMixin, TrainModule
from trainkit.seed import collect_rng_states

if TYPE_CHECKING:
    from trainkit.trainer.trainer import Trainer


def bound_hooks(trainer: Trainer, name: str) -> list[Callable[..., Any]]:
    """The overridden ``name`` hooks of callbacks then module, bound to their fixed arguments."""
    hooks: list[Callable[..., Any]] = [
        functools.partial(getattr(cb, name), trainer, trainer.lightning_module)
        for cb in trainer.callbacks
        if overrides(cb, Callback, name)
    ]
    module = trainer.lightning_module
    if overrides(module, HooksMixin, name):
        hooks.append(getattr(module, name))
    return [trainer.profiler.wrap(name, hook) for hook in hooks]


def extract_loss(output: Any) -> torch.Tensor | None:
    """The loss from what training_step returned: a tensor, a dict with ``loss``, or None."""
    if output is None or isinstance(output, torch.Tensor):
        return output
    if isinstance(output, dict) and "loss" in output:
        return output["loss"]
    raise TypeError(
        f"training_step returned {type(output).__name__}; expected a loss tensor, a dict with "
        "'loss', or None to skip the batch"
    )


def start_iterating(trainer: Trainer, loader: Any) -> Iterator[Any]:
    """``iter(loader)``; when that forks workers, the collectives in flight settle first."""
    if forks_workers(loader):
        if trainer._preemption is not None:
            trainer._preemption.settle()
        let_collective_threads_leave_python()
    return iter(loader)


class FitLoop:
    """Epochs of training batches, with validation at the configured interval."""

    def __init__(self, trainer: Trainer) -> None:
        self.trainer = trainer

    def run(self) -> None:
        trainer = self.trainer
        trainer._call("on_fit_start")
        if trainer.val_loaders and trainer.num_sanity_val_steps:
            trainer.sanity_checking = True
            trainer._call("on_sanity_check_start")
            steps = trainer.num_sanity_val_steps
            EvalLoop(trainer, "validation").run(trainer.val_loaders, 1.0 if steps == -1 else steps)
            trainer._call("on_sanity_check_end")
            trainer.sanity_checking = False
        checkpoint_state.restore_rng(trainer)
        trainer._call("on_train_start")
        while not trainer.fit_done:
            self.run_epoch()
        if trainer.preempted is None:  # a preempted fit has not ended: it resumes later
            trainer._call("on_train_end")
            trainer._call("on_fit_end")

    def run_epoch(self) -> None:
        trainer = self.trainer
        module = trainer.lightning_module
        loader = trainer.train_loader
        set_sampler_epoch(loader, trainer.current_epoch)
        trainer.num_training_batches = limited_batches(
            loader, trainer.limit_train_batches, "limit_train_batches"
        )
        trainer._epoch_start_rng = collect_rng_states()
        store = trainer._new_train_store()
        module.train()
        trainer._call("on_train_epoch_start")
        skip = checkpoint_state.batches_to_skip(trainer)
        if skip:
            checkpoint_state.restore_epoch_metrics(trainer, store)
        trainer._epoch_phase = "batches"
        self._run_batches(loader, skip, store)
        trainer.num_training_batches_seen = trainer._batches_done
        if trainer.preempted is None:
            trainer._epoch_phase = "end"
            self.finish_epoch(store)
        trainer._epoch_phase = None

    def _run_batches(self, loader: Any, skip: int, store: MetricStore) -> None:
        trainer = self.trainer
        module = trainer.lightning_module
        wrapped = trainer._wrapped
        strategy = trainer.strategy
        precision = trainer.precision_plugin
        profiler = trainer.profiler
        step_fn = profiler.wrap("training_step", strategy.training_step_fn(wrapped, module))
        to_device = strategy.batch_transfer_fn()
        start_hooks = bound_hooks(trainer, "on_train_batch_start")
        end_hooks = bound_hooks(trainer, "on_train_batch_end")
        step_end = (
            module.training_step_end
            if overrides(module, TrainModule, "training_step_end")
            else strategy.default_step_end()
        )
        automatic = module.automatic_optimization
        optimizer_step = trainer._stepper.step
        backward = trainer._stepper.backward
        accumulate = trainer.accumulate_grad_batches
        total = trainer.num_training_batches
        val_every = trainer._val_every_n_batches()
        log_every = trainer.log_every_n_steps if trainer.loggers else 0
        max_steps = trainer.max_steps
        mixed = precision.is_mixed
        distributed = strategy.is_distributed and accumulate > 1
        preemption = trainer._preemption
        mark = trainer._board.mark
        epoch = trainer.current_epoch

        iterator = start_iterating(trainer, loader)
        for _ in range(skip):
            next(iterator)
        trainer._batches_done = skip
        if skip:
            checkpoint_state.restore_rng(trainer, after_skip=True)
            if val_every and skip % val_every == 0:  # it ran after the checkpoint was taken
                trainer._run_validation()
        batch_idx = skip - 1
        for batch_idx, batch in enumerate(iterator, start=skip):
            if batch_idx >= total:
                batch_idx -= 1
                break
            mark(TRAINING_STEP, epoch, batch_idx)
            store.new_batch(batch)
            if to_device is not None:
                batch = to_device(batch)
            if start_hooks and any(hook(batch, batch_idx) == -1 for hook in start_hooks):
                break
            if automatic:
                boundary = (batch_idx + 1) % accumulate == 0 or batch_idx + 1 == total
                sync = strategy.no_backward_sync(wrapped) if distributed and not boundary else None
                if sync is not None:
                    sync.__enter__()
                if mixed:
                    with precision.autocast():
                        output = step_fn(batch, batch_idx)
                else:
                    output = step_fn(batch, batch_idx)
                if step_end is not None:
                    output = step_end(output)
                loss = extract_loss(output)
                if loss is not None:
                    backward(loss / accumulate if accumulate > 1 else loss)
                if sync is not None:
                    sync.__exit__(None, None, None)
                if boundary:
                    optimizer_step()
                    trainer.global_step += 1
                    if log_every and trainer.global_step % log_every == 0:
                        trainer._log_step_metrics(store)
            else:
                if mixed:
                    with precision.autocast():
                        output = step_fn(batch, batch_idx)
                else:
                    output = step_fn(batch, batch_idx)
                trainer.global_step += 1
                if log_every and trainer.global_step % log_every == 0:
                    trainer._log_step_metrics(store)
            trainer._batches_done = batch_idx + 1
            for hook in end_hooks:
                hook(output, batch, batch_idx)
            if preemption is not None and preemption.should_stop(not automatic or boundary):
                preemption.save_and_stop()
                break
            if val_every and (batch_idx + 1) % val_every == 0:
                trainer._run_validation()
            if trainer.should_stop or (0 <= max_steps <= trainer.global_step):
                break
            mark(DATA, epoch, batch_idx + 1)
        trainer._batches_done = batch_idx + 1

    def finish_epoch(self, store: MetricStore) -> None:
        """Epoch-end hooks, metric aggregates, epoch schedulers, then the monitoring callbacks."""
        trainer = self.trainer
        module = trainer.lightning_module
        trainer._board.mark(rank_board.EPOCH_END)
        monitors = [cb for cb in trainer.callbacks if getattr(cb, "order", 0) > 0]
        for callback in trainer.callbacks:
            if callback not in monitors:
                callback.on_train_epoch_end(trainer, module)
        store.default_on_step, store.default_on_epoch = False, True
        module.on_train_epoch_end()
        trainer._reduce_train_epoch(store)
        completed = trainer.num_training_batches_seen >= trainer.num_training_batches or not (
            0 <= trainer.max_steps <= trainer.global_step
        )
        for config in trainer.lr_scheduler_configs if completed else ():
            if config.interval == "epoch" and (trainer.current_epoch + 1) % config.frequency == 0:
                step_scheduler(trainer, config)
        for callback in monitors:
            callback.on_train_epoch_end(trainer, module)
        for logger in trainer.loggers if trainer.is_global_zero else ():
            logger.save()
        if completed:  # an epoch cut short by max_steps is resumed, not counted
            trainer.current_epoch += 1


def step_scheduler(trainer: Trainer, config: Any) -> None:
    """Step one scheduler; ReduceLROnPlateau-style ones get their monitored metric."""
    if config.needs_metric:
        metrics = trainer.callback_metrics
        if config.monitor not in metrics:
            raise KeyError(
                f"lr_scheduler monitor {config.monitor!r} was not logged; logged: {sorted(metrics)}"
            )
        config.scheduler.step(to_float(metrics[config.monitor]))
    else:
        config.scheduler.step()


class EvalLoop:
    """One pass over validation or test loaders, reducing what was logged."""

    def __init__(self, trainer: Trainer, stage: str) -> None:
        self.trainer = trainer
        self.stage = stage

    def run(self, loaders: list[Any], limit: int | float) -> list[dict[str, torch.Tensor]]:
        trainer = self.trainer
        module = trainer.lightning_module
        stage = self.stage
        strategy = trainer.strategy
        step = trainer.profiler.wrap(f"{stage}_step", strategy.step_fn(module, f"{stage}_step"))
        step_end_name = f"{stage}_step_end"
        step_end = (
            getattr(module, step_end_name)
            if overrides(module, TrainModule, step_end_name)
            else strategy.default_step_end()
        )
        to_device = trainer.strategy.batch_transfer_fn()
        end_hooks = bound_hooks(trainer, f"on_{stage}_batch_end")
        start_hooks = bound_hooks(trainer, f"on_{stage}_batch_start")
        previous_store = trainer._metric_store
        store = trainer._new_store(stage)
        was_training = module.training
        module.eval()
        results: list[dict[str, torch.Tensor]] = []
        grad_off = torch.no_grad() if trainer.state == "fit" else torch.inference_mode()
        try:
            with grad_off:
                trainer._call(f"on_{stage}_start")
                trainer._call(f"on_{stage}_epoch_start")
                for loader_idx, loader in enumerate(loaders):
                    total = limited_batches(
                        loader, limit, f"limit_{'val' if stage == 'validation' else stage}_batches"
                    )
                    trainer.num_eval_batches = total if total != math.inf else 0
                    extra = (loader_idx,) if len(loaders) > 1 else ()
                    for batch_idx, batch in enumerate(start_iterating(trainer, loader)):
                        if batch_idx >= total:
                            break
                        store.new_batch(batch)
                        if to_device is not None:
                            batch = to_device(batch)
                        for hook in start_hooks:
                            hook(batch, batch_idx, loader_idx)
                        with trainer.precision_plugin.autocast():
                            output = step(batch, batch_idx, *extra)
                        if step_end is not None:
                            output = step_end(output)
                        for hook in end_hooks:
                            hook(output, batch, batch_idx, loader_idx)
                    reduced = store.reduce_epoch()
                    if len(loaders) > 1:
                        suffix = f"/dataloader_idx_{loader_idx}"
                        store.meta.update({k + suffix: store.meta[k] for k in reduced})
                        reduced = {k + suffix: v for k, v in reduced.items()}
                    results.append(reduced)
                store.default_on_step = False
                trainer._call(f"on_{stage}_epoch_end")
                tail = store.reduce_epoch()
                if results:
                    results[-1].update(tail)
                if not trainer.sanity_checking:
                    trainer._record_eval_metrics(store, results)
                trainer._call(f"on_{stage}_end")
        finally:
            trainer._metric_store = previous_store
            module.train(was_training)
        return results


class PredictLoop:
    """Run ``predict_step`` over predict loaders and collect what it returns."""

    def __init__(self, trainer: Trainer) -> None:
        self.trainer = trainer

    def run(self, loaders: list[Any], limit: int | float) -> list[list[Any]]:
        trainer = self.trainer
        module = trainer.lightning_module
        to_device = trainer.strategy.batch_transfer_fn()
        predict_step = trainer.strategy.step_fn(module, "predict_step")
        end_hooks = bound_hooks(trainer, "on_predict_batch_end")
        module.eval()
        outputs: list[list[Any]] = []
        with torch.inference_mode():
            trainer._call("on_predict_start")
            trainer._call("on_predict_epoch_start")
            for loader_idx, loader in enumerate(loaders):
                total = limited_batches(loader, limit, "limit_predict_batches")
                extra = (loader_idx,) if len(loaders) > 1 else ()
                collected = []
                for batch_idx, batch in enumerate(start_iterating(trainer, loader)):
                    if batch_idx >= total:
                        break
                    if to_device is not None:
                        batch = to_device(batch)
                    with trainer.precision_plugin.autocast():
                        output = predict_step(batch, batch_idx, *extra)
                    collected.append(output)
                    for hook in end_hooks:
                        hook(output, batch, batch_idx, loader_idx)
                outputs.append(collected)
            trainer._call("on_predict_epoch_end")
            trainer._call("on_predict_end")
        return outputs
