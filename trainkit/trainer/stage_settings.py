"""The Trainer arguments a stage reads, resolved and checked once by the Trainer, which owns
them; the stage runner receives them, and the Trainer's read-outs of the same names
(``readouts/settings.py``) read them."""

from __future__ import annotations

from dataclasses import dataclass

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
    # a dry run: the limits of the real run it stands for and estimates (None: not a dry run)
    dry_run_of: LoopLimits | None = None
    max_restarts: int = 0  # failed ranks started again from the newest last.ckpt
