"""Rescale the configured learning rate for the effective batch, once, when a fit starts."""

from __future__ import annotations

from dataclasses import dataclass

from trainkit.loops.state import RunState
from trainkit.scaling import lr_factor, scale_learning_rates


@dataclass(frozen=True)
class LRScaling:
    """What ``scale_lr_for_batch`` did: the rule, the first parameter group's LR before and
    after (None without optimizers), and the factor applied."""

    rule: str
    configured: float | None
    factor: float
    final: float | None


def scale_lr_for_batch(
    state: RunState, rule: str, reference_batch_size: int | None, effective: int | None
) -> LRScaling:
    """Apply ``rule`` ('none', 'linear', 'sqrt') to the built optimizers and schedulers of
    ``state`` for the effective batch ``effective`` (None when the loader has no batch_size)."""
    first_group = state.optimizers[0].param_groups[0] if state.optimizers else None
    configured = first_group["lr"] if first_group else None
    factor = 1.0
    if rule != "none":
        if effective is None:
            raise ValueError(
                "lr_scaling needs a train DataLoader with a batch_size to know the effective batch"
            )
        factor = lr_factor(rule, effective, reference_batch_size)
        scale_learning_rates(
            state.optimizers, [c.scheduler for c in state.lr_scheduler_configs], factor
        )
    final = first_group["lr"] if first_group else None
    return LRScaling(rule=rule, configured=configured, factor=factor, final=final)
