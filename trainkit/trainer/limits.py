"""The Trainer's loop limits, as Lightning names them: the checked ``LoopLimits`` of the run
state (frozen for a run; ``accumulate_grad_batches`` can be set, per epoch). Plain properties
that the ``Trainer`` class body lists by name."""

from __future__ import annotations

import dataclasses
from typing import Protocol

from trainkit.state import RunState


class OwnsRunState(Protocol):
    run_state: RunState


# ---- loop limits (frozen for the run; LoopLimits' fields) ---------------------------------------
@property
def max_epochs(self: OwnsRunState) -> int | float:
    """The Trainer's ``max_epochs`` (frozen for the run)."""
    return self.run_state.limits.max_epochs


@property
def min_epochs(self: OwnsRunState) -> int:
    """The Trainer's ``min_epochs`` (frozen for the run)."""
    return self.run_state.limits.min_epochs


@property
def max_steps(self: OwnsRunState) -> int:
    """The Trainer's ``max_steps`` (frozen for the run)."""
    return self.run_state.limits.max_steps


@property
def min_steps(self: OwnsRunState) -> int:
    """The Trainer's ``min_steps`` (frozen for the run)."""
    return self.run_state.limits.min_steps


@property
def limit_train_batches(self: OwnsRunState) -> int | float:
    """The Trainer's ``limit_train_batches`` (frozen for the run)."""
    return self.run_state.limits.limit_train_batches


@property
def limit_val_batches(self: OwnsRunState) -> int | float:
    """The Trainer's ``limit_val_batches`` (frozen for the run)."""
    return self.run_state.limits.limit_val_batches


@property
def limit_test_batches(self: OwnsRunState) -> int | float:
    """The Trainer's ``limit_test_batches`` (frozen for the run)."""
    return self.run_state.limits.limit_test_batches


@property
def limit_predict_batches(self: OwnsRunState) -> int | float:
    """The Trainer's ``limit_predict_batches`` (frozen for the run)."""
    return self.run_state.limits.limit_predict_batches


@property
def val_check_interval(self: OwnsRunState) -> int | float:
    """The Trainer's ``val_check_interval`` (frozen for the run)."""
    return self.run_state.limits.val_check_interval


@property
def check_val_every_n_epoch(self: OwnsRunState) -> int | None:
    """The Trainer's ``check_val_every_n_epoch`` (frozen for the run)."""
    return self.run_state.limits.check_val_every_n_epoch


@property
def num_sanity_val_steps(self: OwnsRunState) -> int:
    """The Trainer's ``num_sanity_val_steps`` (frozen for the run)."""
    return self.run_state.limits.num_sanity_val_steps


@property
def accumulate_grad_batches(self: OwnsRunState) -> int:
    """The Trainer's ``accumulate_grad_batches``; settable: from the next epoch on (Lightning's
    GradientAccumulationScheduler sets it per epoch)."""
    return self.run_state.limits.accumulate_grad_batches


@accumulate_grad_batches.setter
def accumulate_grad_batches(self: OwnsRunState, value: int) -> None:
    self.run_state.limits = dataclasses.replace(
        self.run_state.limits, accumulate_grad_batches=value
    )


@property
def gradient_clip_val(self: OwnsRunState) -> float | None:
    """The Trainer's ``gradient_clip_val`` (frozen for the run)."""
    return self.run_state.limits.gradient_clip_val


@property
def gradient_clip_algorithm(self: OwnsRunState) -> str:
    """The Trainer's ``gradient_clip_algorithm`` (frozen for the run)."""
    return self.run_state.limits.gradient_clip_algorithm


@property
def log_every_n_steps(self: OwnsRunState) -> int:
    """The Trainer's ``log_every_n_steps`` (frozen for the run)."""
    return self.run_state.limits.log_every_n_steps


@property
def overfit_batches(self: OwnsRunState) -> int | float:
    """The Trainer's ``overfit_batches`` (frozen for the run)."""
    return self.run_state.limits.overfit_batches


@property
def reload_dataloaders_every_n_epochs(self: OwnsRunState) -> int:
    """The Trainer's ``reload_dataloaders_every_n_epochs`` (frozen for the run)."""
    return self.run_state.limits.reload_dataloaders_every_n_epochs
