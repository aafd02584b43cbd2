"""The Trainer arguments a stage reads, resolved and checked once by the Trainer, which owns
them; the stage runner receives them, and the Trainer's attributes of the same names read them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from trainkit.devices import DeviceSelection
from trainkit.state.limits import LoopLimits


@dataclass(frozen=True)
class StageSettings:
    """The Trainer arguments a stage reads, resolved once by the Trainer."""

    selection: DeviceSelection
    num_nodes: int
    lr_scaling: str
    reference_batch_size: int | None
    batch_size_mode: str
    use_distributed_sampler: bool
    checkpoint_weights_only: bool
    detect_anomaly: bool
    show_summary: bool  # the startup table and the closing lines of a fit (global rank 0)
    dry_run: LoopLimits | None = None  # a dry run: the limits of the real run it stands for
    max_restarts: int = 0  # failed ranks started again from the newest last.ckpt


class OwnsSettings(Protocol):
    """The Trainer, as its settings' read-outs see it."""

    settings: StageSettings


# ---- the Trainer's own settings (read-only: the run was resolved with them) ---------------------
@property
def selection(self: OwnsSettings) -> DeviceSelection:
    """The devices the run uses, as resolved from ``devices``/``gpus``/``accelerator``."""
    return self.settings.selection


@property
def dry_run(self: OwnsSettings) -> bool:
    """Whether this run is a dry run (one batch of each loop, measured, nothing written)."""
    return self.settings.dry_run is not None


@property
def lr_scaling(self: OwnsSettings) -> str:
    return self.settings.lr_scaling


@property
def reference_batch_size(self: OwnsSettings) -> int | None:
    return self.settings.reference_batch_size


@property
def batch_size_mode(self: OwnsSettings) -> str:
    return self.settings.batch_size_mode


@property
def use_distributed_sampler(self: OwnsSettings) -> bool:
    return self.settings.use_distributed_sampler


@property
def checkpoint_weights_only(self: OwnsSettings) -> bool:
    return self.settings.checkpoint_weights_only


@property
def detect_anomaly(self: OwnsSettings) -> bool:
    return self.settings.detect_anomaly


@property
def max_restarts(self: OwnsSettings) -> int:
    return self.settings.max_restarts
