"""Scale the learning rate for the effective batch and describe the run, once, at fit start."""

from __future__ import annotations

import math
import os
import sys
from typing import TYPE_CHECKING

from trainkit.data import limited_batches
from trainkit.scaling import RunSummary, lr_factor, scale_learning_rates

if TYPE_CHECKING:
    from trainkit.trainer.trainer import Trainer


def summarize_run(trainer: Trainer) -> RunSummary:
    """Apply ``lr_scaling`` to the built optimizers/schedulers and collect the startup numbers."""
    strategy = trainer.strategy
    effective = trainer.effective_batch_size
    first_group = trainer.optimizers[0].param_groups[0] if trainer.optimizers else None
    configured = first_group["lr"] if first_group else None
    factor = 1.0
    if trainer.lr_scaling != "none":
        if effective is None:
            raise ValueError(
                "lr_scaling needs a train DataLoader with a batch_size to know the effective batch"
            )
        factor = lr_factor(trainer.lr_scaling, effective, trainer.reference_batch_size)
        scale_learning_rates(
            trainer.optimizers, [c.scheduler for c in trainer.lr_scheduler_configs], factor
        )
    batches = limited_batches(
        trainer.train_loader, trainer.limit_train_batches, "limit_train_batches"
    )
    steps = (
        math.ceil(batches / trainer.accumulate_grad_batches) if batches != math.inf else math.inf
    )
    dataset = getattr(trainer.train_loader, "dataset", None)
    try:
        samples = len(dataset) if dataset is not None else None
    except TypeError:
        samples = None
    selection = trainer.selection
    devices = (
        ",".join(map(str, selection.ids))
        if selection.accelerator == "gpu"
        else f"{selection.count} process(es)"
    )
    return RunSummary(
        strategy=strategy.name,
        backend=getattr(strategy, "backend", "-") if strategy.is_distributed else "-",
        accelerator=selection.accelerator,
        devices=devices,
        world_size=trainer.world_size,
        num_nodes=trainer.num_nodes,
        precision=trainer.precision,
        per_device_batch=getattr(trainer.train_loader, "batch_size", None),
        accumulate=trainer.accumulate_grad_batches,
        effective_batch=effective,
        configured_lr=configured,
        lr_rule=trainer.lr_scaling,
        lr_factor=factor,
        final_lr=first_group["lr"] if first_group else None,
        samples_per_epoch=samples,
        steps_per_epoch=steps,
        total_steps=trainer.estimated_stepping_batches,
        seed=os.environ.get("TRAINKIT_GLOBAL_SEED", "not set"),
        log_dir=trainer.log_dir,
    )


def print_summary(summary: RunSummary) -> None:
    """The startup table: rich on a terminal, plain text otherwise."""
    if sys.stdout.isatty():
        from rich.console import Console

        Console().print(summary.render(rich=True))
    else:
        print(summary.render(rich=False), flush=True)
