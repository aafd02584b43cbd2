"""Describe a fit once it starts (the startup table), print it, and say where it ended."""

from __future__ import annotations

import dataclasses
import math
import os
from typing import TYPE_CHECKING

from trainkit.data import limited_batches
from trainkit.devices import DeviceSelection
from trainkit.distributed.env import output_is_terminal
from trainkit.distributed.rank_env import describe_threads
from trainkit.scaling import RunSummary
from trainkit.state import LoopLimits, RunState
from trainkit.trainer.lr_scaling import LRScaling

if TYPE_CHECKING:
    from trainkit.callbacks.checkpoint import ModelCheckpoint


def describe_run(
    state: RunState,
    selection: DeviceSelection,
    effective: int | None,
    lr: LRScaling,
    limits: LoopLimits,
) -> RunSummary:
    """The startup numbers of a fit whose optimizers are built and whose LR ``lr`` says how
    it was scaled (``effective`` is the effective batch size, None when the loader has no
    batch_size), under ``limits``. Reads only: nothing of the run changes."""
    strategy = state.strategy
    batches = limited_batches(
        state.given.train_loader, limits.limit_train_batches, "limit_train_batches"
    )
    dataset = getattr(state.given.train_loader, "dataset", None)
    try:
        samples = len(dataset) if dataset is not None else None
    except TypeError:
        samples = None
    if selection.accelerator == "gpu":
        devices = ",".join(map(str, selection.ids))
    elif not strategy.is_distributed and selection.count > 1:  # dp on CPU
        devices = f"{selection.count} batch chunks in one process"
    else:
        devices = f"{selection.count} process(es)"
    per_node = strategy.processes_per_node if strategy.is_distributed else 1
    return RunSummary(
        strategy=strategy.describe(),
        backend=getattr(strategy, "backend", "-") if strategy.is_distributed else "-",
        accelerator=selection.accelerator,
        devices=devices,
        world_size=strategy.world_size,
        num_nodes=strategy.num_nodes,
        precision=strategy.precision,
        per_device_batch=getattr(state.given.train_loader, "batch_size", None),
        accumulate=limits.accumulate_grad_batches,
        effective_batch=effective,
        configured_lr=lr.configured,
        lr_rule=lr.rule,
        lr_factor=lr.factor,
        final_lr=lr.final,
        start_lr=lr.start,
        samples_per_epoch=samples,
        steps_per_epoch=limits.steps_per_epoch(batches),
        total_steps=limits.total_steps(batches),
        seed=os.environ.get("TRAINKIT_GLOBAL_SEED", "not set"),
        log_dir=state.log_dir or state.default_root_dir,
        processes_per_node=per_node,
        optimizer=describe_optimizers(state),
        threads=describe_threads(per_node, os.environ),
    )


def describe_optimizers(state: RunState) -> str:
    """The optimizers' classes and what made them (the module's configure_optimizers, or the
    config's optimizer section, which then replaces it)."""
    module = state.given.module
    names = ", ".join(type(optimizer).__name__ for optimizer in state.optimizers) or "-"
    source = getattr(getattr(module, "configure_optimizers", None), "source", None)
    return f"{names} (from {source or f'{type(module).__name__}.configure_optimizers'})"


def print_summary(summary: RunSummary) -> None:
    """The startup table: rich on a terminal, plain text otherwise."""
    if output_is_terminal():  # not mpirun's pty
        from rich.console import Console

        Console().print(summary.render(rich=True))
    else:
        print(summary.render(rich=False), flush=True)


def resumed(summary: RunSummary, path: str, state: RunState, limits: LoopLimits) -> RunSummary:
    """The summary of a fit that continues ``path``: the steps already taken (at whatever rate
    the earlier run had) plus those left at this run's rate, under ``limits`` (the real run's,
    in a dry run too); never fewer than the steps already taken."""
    position = state.position
    resume = state.stop.resume
    skip = resume.skip if resume is not None else 0
    per_epoch = summary.steps_per_epoch
    if per_epoch == math.inf or limits.max_epochs == math.inf:
        total = math.inf
    else:
        done_in_epoch = math.ceil(skip / limits.accumulate_grad_batches)
        total = position.global_step + (limits.max_epochs - position.epoch) * per_epoch
        total -= done_in_epoch
    if limits.max_steps >= 0:
        total = min(total, limits.max_steps)
    total = max(total, position.global_step)  # a finished run: nothing left
    at = f"epoch {position.epoch}, step {position.global_step} of {total}"
    if total == position.global_step:
        at += " (nothing left to train: raise max_epochs or max_steps to go on)"
    return dataclasses.replace(summary, total_steps=total, resumed_from=path, resumed_at=at)


def print_closing(
    state: RunState, checkpoint_callback: ModelCheckpoint | None, seconds: float
) -> None:
    """After fit, on rank 0: where the checkpoints and logs are, the best score, the wall time."""
    position = state.position
    lines = [f"fit done in {seconds:.1f} s: epoch {position.epoch}, step {position.global_step}"]
    callback = checkpoint_callback
    if callback is not None and callback.best_model_path:
        score = getattr(callback, "best_model_score", None)
        if callback.monitor is None:
            monitored = " (the latest: no monitor set)"
        else:
            monitored = f" ({callback.monitor}={float(score):.6g})" if score is not None else ""
        lines.append(f"  best checkpoint  {callback.best_model_path}{monitored}")
    if callback is not None and callback.last_model_path:
        lines.append(f"  last checkpoint  {callback.last_model_path}")
    if state.given.loggers:
        views = [logger.view_command for logger in state.given.loggers if logger.view_command]
        shown = f"  ({'; '.join(views)})" if views else ""
        lines.append(f"  logs             {state.log_dir}{shown}")
    print("\n".join(lines), flush=True)
