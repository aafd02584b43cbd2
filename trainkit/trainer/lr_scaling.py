"""Rescale the configured learning rate for the effective batch, once, when a fit starts."""

from __future__ import annotations

from dataclasses import dataclass

from trainkit.scaling import lr_factor, scale_learning_rates
from trainkit.state import RunState


@dataclass(frozen=True)
class LRScaling:
    """What ``scale_lr_for_batch`` did: the rule, the configured LR of the first optimizer (its
    constructor's ``lr``) before and after the factor, and the rate its first parameter group
    starts at (a scheduler's start, e.g. OneCycleLR's max_lr / div_factor); None without
    optimizers."""

    rule: str
    configured: float | None
    factor: float
    final: float | None
    start: float | None = None


def scale_lr_for_batch(
    state: RunState, rule: str, reference_batch_size: int | None, effective: int | None
) -> LRScaling:
    """Apply ``rule`` ('none', 'linear', 'sqrt') to the built optimizers and schedulers of
    ``state`` for the effective batch ``effective`` (None when the loader has no batch_size)."""
    optimizer = state.optimizers[0] if state.optimizers else None
    first_group = optimizer.param_groups[0] if optimizer is not None else None
    # what the config says: a scheduler built with the optimizer already moved the groups' lr
    # (an engine's optimizer, deepspeed's ZeRO wrapper, has no defaults: then the group's)
    defaults = getattr(optimizer, "defaults", None)
    given = defaults.get("lr") if isinstance(defaults, dict) else None
    configured = given if isinstance(given, int | float) else (first_group or {}).get("lr")
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
    final = configured * factor if configured is not None else None
    start = first_group["lr"] if first_group else None
    return LRScaling(rule=rule, configured=configured, factor=factor, final=final, start=start)
