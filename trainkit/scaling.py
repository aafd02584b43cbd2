"""Effective batch size, learning-rate scaling rules, and the startup configuration table."""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from typing import Any

from trainkit.errors import ConfigError

RULES = ("none", "linear", "sqrt")
BATCH_SIZE_MODES = ("per_device", "effective")
LR_KEYS = ("lr", "initial_lr", "max_lr", "min_lr")


class BatchLoading(enum.Enum):
    """Who loads distinct batches under a strategy (its ``batch_loading``)."""

    PER_DEVICE = "per_device"  # the ddp family: each device's rank loads its own
    PER_NODE = "per_node"  # dp, ddp2: one loader per node, its batch split over the devices
    SHARED = "shared"  # pipeline: every stage walks the same batch


def effective_batch_size(
    per_device: int, devices: int, num_nodes: int, accumulate: int, loading: BatchLoading
) -> int:
    """Samples per optimizer step: devices count only when each loads its own batch."""
    replicas = {
        BatchLoading.PER_DEVICE: devices * num_nodes,
        BatchLoading.PER_NODE: num_nodes,
        BatchLoading.SHARED: 1,
    }[loading]
    return per_device * replicas * accumulate


def lr_factor(rule: str, effective: int, reference: int | None) -> float:
    """``effective / reference`` (linear), its square root (sqrt), or 1 (none)."""
    if rule not in RULES:
        raise ConfigError("trainer.lr_scaling", rule, "'none', 'linear' or 'sqrt'")
    if rule == "none":
        return 1.0
    if reference is None or reference < 1:
        raise ConfigError(
            "trainer.reference_batch_size",
            reference,
            "a positive int with lr_scaling",
            "set it to the batch size your learning rate was tuned at",
        )
    ratio = effective / reference
    return ratio if rule == "linear" else math.sqrt(ratio)


def per_device_batch(batch_size: int, world_size: int, mode: str, accumulate: int = 1) -> int:
    """The DataLoader batch per device: as configured (``per_device``), or (``effective``) the
    effective batch, the samples of one optimizer step, divided by the world size and the
    batches accumulated per step."""
    if mode not in BATCH_SIZE_MODES:
        raise ConfigError("trainer.batch_size_mode", mode, "'per_device' or 'effective'")
    if mode == "per_device":
        return batch_size
    shares = world_size * accumulate
    if batch_size % shares:
        what = f"the world size {world_size}" + (
            f" x accumulate_grad_batches {accumulate} = {shares}" if accumulate > 1 else ""
        )
        raise ConfigError(
            "batch_size",
            batch_size,
            f"a multiple of {what} with batch_size_mode: effective",
            f"use {batch_size - batch_size % shares or shares} or {batch_size + shares - batch_size % shares}",
        )
    return batch_size // shares


def scale_learning_rates(optimizers: list[Any], schedulers: list[Any], factor: float) -> None:
    """Multiply every param group's LR fields and each scheduler's base LRs by ``factor``."""
    if factor == 1.0:
        return
    for optimizer in optimizers:
        for group in optimizer.param_groups:
            for key in LR_KEYS:
                if isinstance(group.get(key), int | float):
                    group[key] = group[key] * factor
    for scheduler in schedulers:
        for attribute in ("base_lrs", "_last_lr", "min_lrs"):
            values = getattr(scheduler, attribute, None)
            if isinstance(values, list):
                setattr(scheduler, attribute, [v * factor for v in values])


@dataclass
class RunSummary:
    """Every number the startup table shows; also logged as hyperparameters."""

    strategy: str
    backend: str
    accelerator: str
    devices: str
    world_size: int
    num_nodes: int
    precision: str
    per_device_batch: int | None
    accumulate: int
    effective_batch: int | None
    configured_lr: float | None
    lr_rule: str
    lr_factor: float
    final_lr: float | None
    samples_per_epoch: int | None
    steps_per_epoch: int | float
    total_steps: int | float
    seed: str
    log_dir: str
    processes_per_node: int = 1
    start_lr: float | None = None  # where a scheduler starts the rate, if not at final_lr
    resumed_from: str | None = None
    resumed_at: str | None = None  # "epoch E, step S"
    optimizer: str = "-"  # the optimizer classes and where they come from
    threads: str = "-"  # intra-op threads per process, and the rule that set them

    def rows(self) -> list[tuple[str, str]]:
        def fmt(value: object) -> str:
            if value is None:
                return "-"
            if isinstance(value, float):
                return "inf" if math.isinf(value) else f"{value:.6g}"
            return str(value)

        rule = self.lr_rule if self.lr_rule == "none" else f"{self.lr_rule} (x{self.lr_factor:.4g})"
        return [
            ("strategy", self.strategy),
            ("backend", self.backend),
            ("accelerator", self.accelerator),
            ("devices", self.devices),
            ("processes per node", fmt(self.processes_per_node)),
            ("world size", fmt(self.world_size)),
            ("num nodes", fmt(self.num_nodes)),
            ("precision", self.precision),
            ("threads per process", self.threads),
            ("batch per device", fmt(self.per_device_batch)),
            ("accumulate grad batches", fmt(self.accumulate)),
            ("effective batch", fmt(self.effective_batch)),
            ("optimizer", self.optimizer),
            ("configured lr", fmt(self.configured_lr)),
            ("lr scaling", rule),
            ("final lr", fmt(self.final_lr)),
            *([("lr at the first step", fmt(self.start_lr))] if self.starts_elsewhere else []),
            ("samples per epoch", fmt(self.samples_per_epoch)),
            ("optimizer steps per epoch", fmt(self.steps_per_epoch)),
            ("total optimizer steps", fmt(self.total_steps)),
            *([("resumed from", self.resumed_from)] if self.resumed_from else []),
            *([("resumes at", self.resumed_at)] if self.resumed_at else []),
            ("seed", self.seed),
            ("log dir", self.log_dir),
        ]

    @property
    def starts_elsewhere(self) -> bool:
        """Whether a scheduler starts the rate away from the final lr (warm-up, one-cycle)."""
        if self.start_lr is None or self.final_lr is None:
            return False
        return not math.isclose(self.start_lr, self.final_lr, rel_tol=1e-6)

    def as_hparams(self) -> dict[str, Any]:
        return {f"run/{name.replace(' ', '_')}": value for name, value in self.rows()}

    def render(self, rich: bool) -> str | Any:
        """A rich Table (terminal) or aligned plain text."""
        if rich:
            from rich.table import Table

            table = Table(title="training configuration", show_header=False)
            table.add_column(style="bold")
            table.add_column(justify="right")
            for name, value in self.rows():
                table.add_row(name, value)
            return table
        width = max(len(name) for name, _ in self.rows())
        return "\n".join(
            ["training configuration"] + [f"  {n:<{width}}  {v}" for n, v in self.rows()]
        )
