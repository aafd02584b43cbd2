"""A dry run: the real run's start (launcher, strategy, sharding, precision) and a few training and
validation batches on every rank, measured, then a report of what the whole run will take.

Nothing is written: no checkpoint, no log. What a real run would meet only after its first
epoch (a validation_step that fails, a monitored key nobody logs) fails here in seconds.
"""

from __future__ import annotations

import math
import resource
import statistics
import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from trainkit.callbacks.base import Callback
from trainkit.errors import MisconfigurationError
from trainkit.metrics import closest_key_hint
from trainkit.strategies.shards import local_part

if TYPE_CHECKING:
    from trainkit.common.types import STEP_OUTPUT
    from trainkit.module import TrainModule
    from trainkit.scaling import RunSummary
    from trainkit.state import LoopLimits, RunState
    from trainkit.trainer.trainer import Trainer


BATCHES = (
    4  # training and validation batches a dry run runs: the first warms up, the rest are timed
)


def typical(seconds: list[float]) -> float | None:
    """The time of a batch: the median of those after the first (which pays the warm-up:
    allocator, lazy initialisation, autotuning), or the first where it ran alone."""
    timed = seconds[1:] or seconds
    return statistics.median(timed) if timed else None


@dataclass
class RankReading:
    """What one rank measured: its peak memory, parameters it holds, and batch times."""

    rank: int
    peak_memory_bytes: int
    memory_kind: str  # "CUDA allocated" or "RSS"
    parameters: int
    train_step_s: float | None = None  # typical(): after the warm-up where more than one ran
    val_batch_s: float | None = None
    warm_up_only: bool = False  # one training batch ran: its time includes the warm-up


class DryRunProbe(Callback):
    """Times each training batch (forward, backward, optimizer step) and each validation batch
    of a dry run on this rank."""

    def __init__(self) -> None:
        self.train_steps: list[float] = []
        self.val_batches: list[float] = []
        self._started = 0.0

    def on_fit_start(self, trainer: Trainer, pl_module: TrainModule) -> None:
        if torch.cuda.is_available() and pl_module.device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(pl_module.device)

    def on_validation_batch_start(
        self,
        trainer: Trainer,
        pl_module: TrainModule,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        self._started = time.perf_counter()

    def on_validation_batch_end(
        self,
        trainer: Trainer,
        pl_module: TrainModule,
        outputs: STEP_OUTPUT,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        times = self.val_batches if trainer.evaluating else self.train_steps
        times.append(time.perf_counter() - self._started)

    # a training batch is timed alike: its hooks take the same arguments, less dataloader_idx
    on_train_batch_start = on_validation_batch_start
    on_train_batch_end = on_validation_batch_end

    def reading(self, rank: int, module: torch.nn.Module) -> RankReading:
        """This rank's measurements, once the dry run's batches ran."""
        device = next(module.parameters(), torch.empty(0)).device
        if device.type == "cuda":
            peak, kind = torch.cuda.max_memory_allocated(device), "CUDA allocated"
        else:  # ru_maxrss is in KiB on Linux, bytes on macOS
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
            peak, kind = (peak if sys.platform == "darwin" else peak * 1024), "RSS"
        held = sum(local_numel(p) for p in module.parameters())
        step, val = typical(self.train_steps), typical(self.val_batches)
        return RankReading(rank, peak, kind, held, step, val, len(self.train_steps) == 1)


def local_numel(parameter: torch.Tensor) -> int:
    """Elements of a parameter this rank holds (its shard, where the strategy shards it)."""
    return local_part(parameter).numel()


def limits_after(limits: LoopLimits, epoch: int, global_step: int, skip: int) -> LoopLimits:
    """A dry run's ``limits`` moved to where a resumed checkpoint stands (epoch ``epoch``,
    ``global_step`` steps, ``skip`` batches of the epoch trained), so that its few batches run
    from there instead of ending at once."""
    import dataclasses

    return dataclasses.replace(
        limits,
        max_epochs=epoch + 1,
        max_steps=global_step + BATCHES,
        limit_train_batches=skip + BATCHES,
    )


def nothing_left(global_step: int) -> str:
    """What a dry run of a checkpoint that already finished the configured run says."""
    return (
        f"\ndry run: the checkpoint already took the run's {global_step} optimizer steps: "
        "nothing left to train; raise trainer.max_epochs or max_steps to go on (exit 0)"
    )


def find_probe(state: RunState) -> DryRunProbe | None:
    """The run's probe (None: not a dry run)."""
    return next((cb for cb in state.given.callbacks if isinstance(cb, DryRunProbe)), None)


def check_monitors(state: RunState, metrics: dict[str, Any]) -> None:
    """Every monitored key (callbacks, plateau schedulers) was logged by the batches that ran;
    a real run would stop at its first check, after an epoch."""
    watchers: list[tuple[str, str]] = [
        (type(cb).__name__, monitor)
        for cb in state.given.callbacks
        if isinstance(monitor := getattr(cb, "monitor", None), str)
    ]
    watchers += [
        ("the lr scheduler", config.monitor)
        for config in state.lr_scheduler_configs
        if config.monitor is not None
    ]
    for who, key in watchers:
        if key not in metrics:
            logged = sorted(metrics)
            raise MisconfigurationError(
                f"dry run: {who} monitors {key!r}, which the training and validation steps never "
                f"logged (logged: {', '.join(logged) or 'nothing'}){closest_key_hint(key, logged)}; "
                f"log it with self.log({key!r}, ...) or monitor a logged key"
            )


def report(
    summary: RunSummary, limits: LoopLimits, state: RunState, readings: list[RankReading]
) -> str:
    """What the dry run measured on every rank, and the run's estimated duration."""
    lines = [
        "",
        f"dry run: up to {BATCHES} training and validation batches on every rank; nothing written",
    ]
    lines.append(
        f"  {'rank':>4}  {'peak memory':>20}  {'parameters':>12}  {'train step':>10}  {'val batch':>10}"
    )
    for r in readings:
        memory = f"{r.peak_memory_bytes / 2**20:,.0f} MiB {r.memory_kind}"
        lines.append(
            f"  {r.rank:>4}  {memory:>20}  {r.parameters:>12,}  {_seconds(r.train_step_s):>10}  "
            f"{_seconds(r.val_batch_s):>10}"
        )
    step = max((r.train_step_s for r in readings if r.train_step_s is not None), default=None)
    val = max((r.val_batch_s for r in readings if r.val_batch_s is not None), default=None)
    epoch = _epoch_seconds(summary, limits, state, step, val)
    if epoch is not None:
        timed = (
            "first step's warm-up included"
            if any(r.warm_up_only for r in readings)
            else "median step after the first"
        )
        lines.append(f"  estimate (slowest rank, {timed}): one epoch {_duration(epoch)}")
        whole = _run_seconds(summary, epoch, limits)
        lines[-1] += f", the whole run {_duration(whole)}" if whole is not None else ", no end set"
    lines.append("dry run: the real run would start (exit 0)")
    return "\n".join(lines)


def _epoch_seconds(
    summary: RunSummary, limits: LoopLimits, state: RunState, step: float | None, val: float | None
) -> float | None:
    from trainkit.data import limited_batches

    if step is None or summary.steps_per_epoch == math.inf:
        return None
    train = step * summary.steps_per_epoch * limits.accumulate_grad_batches
    if val is None:
        return train
    batches = sum(
        limited_batches(loader, limits.limit_val_batches, "limit_val_batches")
        for loader in state.given.val_loaders
    )
    per_epoch = 1 / limits.check_val_every_n_epoch if limits.check_val_every_n_epoch else 1
    if isinstance(limits.val_check_interval, float) and limits.val_check_interval < 1:
        per_epoch = round(1 / limits.val_check_interval)
    return train + val * batches * per_epoch if batches != math.inf else train


def _run_seconds(summary: RunSummary, epoch: float, limits: LoopLimits) -> float | None:
    if summary.total_steps == math.inf or not summary.steps_per_epoch:
        return None
    return epoch * summary.total_steps / summary.steps_per_epoch


def _seconds(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value * 1000:.1f} ms" if value < 0.1 else f"{value * 1000:,.0f} ms"


def _duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, secs = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h{minutes:02d}m{secs:02d}s" if hours else f"{minutes}m{secs:02d}s"
