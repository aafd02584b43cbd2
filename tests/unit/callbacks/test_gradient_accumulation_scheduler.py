"""GradientAccumulationScheduler changes the fit loop's accumulation per epoch (Timer:
test_timer.py)."""

from __future__ import annotations

import pytest
import torch

from tests.helpers.callback_fits import fit
from tests.helpers.models import Regression
from trainkit.callbacks import Callback, GradientAccumulationScheduler
from trainkit.errors import ConfigError, MisconfigurationError


class StepsPerEpoch(Callback):
    """Optimizer steps each epoch took, and the accumulation the trainer reported."""

    def __init__(self) -> None:
        self.steps: list[int] = []
        self.accumulation: list[int] = []
        self._start = 0

    def on_train_epoch_start(self, trainer, module):
        self._start = trainer.global_step

    def on_train_epoch_end(self, trainer, module):
        self.steps.append(trainer.global_step - self._start)
        self.accumulation.append(trainer.accumulate_grad_batches)


def test_accumulation_follows_the_schedule_epoch_by_epoch():
    probe = StepsPerEpoch()
    fit(GradientAccumulationScheduler({1: 2, 3: 4}), probe)
    assert probe.accumulation == [1, 2, 2, 4]
    assert probe.steps == [8, 4, 4, 2]  # 8 batches an epoch


def test_accumulated_steps_match_a_trainer_with_that_accumulation():
    """Epochs under the schedule's factor train like a Trainer with accumulate_grad_batches."""
    reference = Regression()
    scheduled = Regression()
    scheduled.load_state_dict(reference.state_dict())
    fit(GradientAccumulationScheduler({0: 4}), model=scheduled, max_epochs=2)
    fit(model=reference, max_epochs=2, accumulate_grad_batches=4)
    for key, value in reference.state_dict().items():
        assert torch.equal(scheduled.state_dict()[key], value), key


def test_scheduler_rejects_bad_schedules_and_a_trainer_accumulation():
    with pytest.raises(ConfigError, match=r"accumulation factors \[0\]; expected ints >= 1"):
        GradientAccumulationScheduler({2: 0})
    with pytest.raises(ConfigError, match=r"epochs \[-1\]; expected ints >= 0"):
        GradientAccumulationScheduler({-1: 2})
    with pytest.raises(ConfigError, match="remove accumulate_grad_batches from the Trainer"):
        fit(GradientAccumulationScheduler({1: 2}), accumulate_grad_batches=2)

    class Manual(Regression):
        def __init__(self):
            super().__init__()
            self.automatic_optimization = False

        def training_step(self, batch, batch_idx):
            return None

    with pytest.raises(MisconfigurationError, match="automatic optimization only"):
        fit(GradientAccumulationScheduler({1: 2}), model=Manual())
