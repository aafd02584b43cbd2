"""The Trainer's loop limits, as Lightning names them: the checked ``LoopLimits`` of the run
state (frozen for a run; ``accumulate_grad_batches`` can be set, per epoch)."""

from __future__ import annotations

import dataclasses

from trainkit.state import RunState
from trainkit.trainer.readouts.readout import Readout

FROZEN = "The Trainer argument of this name (frozen for the run)."


class LimitReadouts:
    """``max_epochs``, ``limit_val_batches``, ``gradient_clip_val``...: ``LoopLimits``' fields,
    each the Trainer argument of the same name."""

    run_state: RunState

    max_epochs = Readout(lambda t: t.run_state.limits.max_epochs, FROZEN)
    min_epochs = Readout(lambda t: t.run_state.limits.min_epochs, FROZEN)
    max_steps = Readout(lambda t: t.run_state.limits.max_steps, FROZEN)
    min_steps = Readout(
        lambda t: None if t.run_state.limits.min_steps < 0 else t.run_state.limits.min_steps,
        "The Trainer's ``min_steps`` (frozen for the run); None when not given, as Lightning's.",
    )
    limit_train_batches = Readout(lambda t: t.run_state.limits.limit_train_batches, FROZEN)
    limit_val_batches = Readout(lambda t: t.run_state.limits.limit_val_batches, FROZEN)
    limit_test_batches = Readout(lambda t: t.run_state.limits.limit_test_batches, FROZEN)
    limit_predict_batches = Readout(lambda t: t.run_state.limits.limit_predict_batches, FROZEN)
    val_check_interval = Readout(lambda t: t.run_state.limits.val_check_interval, FROZEN)
    check_val_every_n_epoch = Readout(lambda t: t.run_state.limits.check_val_every_n_epoch, FROZEN)
    num_sanity_val_steps = Readout(lambda t: t.run_state.limits.num_sanity_val_steps, FROZEN)
    gradient_clip_val = Readout(lambda t: t.run_state.limits.gradient_clip_val, FROZEN)
    gradient_clip_algorithm = Readout(lambda t: t.run_state.limits.gradient_clip_algorithm, FROZEN)
    log_every_n_steps = Readout(lambda t: t.run_state.limits.log_every_n_steps, FROZEN)
    overfit_batches = Readout(lambda t: t.run_state.limits.overfit_batches, FROZEN)
    reload_dataloaders_every_n_epochs = Readout(
        lambda t: t.run_state.limits.reload_dataloaders_every_n_epochs, FROZEN
    )

    @property
    def accumulate_grad_batches(self) -> int:
        """The Trainer's ``accumulate_grad_batches``; settable: from the next epoch on (Lightning's
        GradientAccumulationScheduler sets it per epoch)."""
        return self.run_state.limits.accumulate_grad_batches

    @accumulate_grad_batches.setter
    def accumulate_grad_batches(self, value: int) -> None:
        self.run_state.limits = dataclasses.replace(
            self.run_state.limits, accumulate_grad_batches=value
        )
