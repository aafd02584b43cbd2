"""The learning-rate range test: from inside a running fit, train ``num_training`` steps with
the rate rising from ``min_lr`` to ``max_lr``, record the smoothed loss of each, stop early when
it diverges, then put the fit back as it was (``search.py``) and, with ``update_attr``, write
the suggested rate to the model's ``lr``/``learning_rate``."""

from __future__ import annotations

import sys
import warnings
from typing import TYPE_CHECKING, Any

import torch

from trainkit.callbacks.base import Callback
from trainkit.callbacks.trainer_view import TrainerView
from trainkit.errors import MisconfigurationError
from trainkit.loops.fit import FitLoop
from trainkit.loops.training_step import TrainingStep, extract_loss
from trainkit.optim import SchedulerConfig
from trainkit.tuner.attributes import has_attribute, set_attribute
from trainkit.tuner.lr_finder import LRFinder
from trainkit.tuner.search import Search
from trainkit.tuner.tunable import TunableTrainer

if TYPE_CHECKING:
    from trainkit.module import TrainModule
    from trainkit.utilities.types import STEP_OUTPUT

LR_NAMES = ("lr", "learning_rate")


class RangeTestLR(torch.optim.lr_scheduler.LRScheduler):
    """Raises each group's rate from its start value to ``end_lr`` over ``num_iter`` steps,
    exponentially or linearly (step k > 0 is at fraction (k + 1) / num_iter of the way)."""

    def __init__(
        self, optimizer: torch.optim.Optimizer, end_lr: float, num_iter: int, mode: str
    ) -> None:
        self.end_lr = end_lr
        self.num_iter = num_iter
        self.mode = mode
        super().__init__(optimizer)

    def get_lr(self) -> list[float | torch.Tensor]:
        bases = [float(lr) for lr in self.base_lrs]
        if self.last_epoch <= 0:
            return list(bases)
        fraction = (self.last_epoch + 1) / self.num_iter
        if self.mode == "linear":
            return [base + fraction * (self.end_lr - base) for base in bases]
        return [base * (self.end_lr / base) ** fraction for base in bases]


class LossRecorder(Callback):
    """During the test: the rate before each optimizer step and the smoothed loss after it
    (an exponential moving average with factor ``beta``, bias-corrected); asks the loop to stop
    once the smoothed loss passes ``early_stop_threshold`` times the best (rank 0 decides)."""

    def __init__(
        self, start_step: int, early_stop_threshold: float | None, beta: float = 0.98
    ) -> None:
        self.start_step = start_step
        self.early_stop_threshold = early_stop_threshold
        self.beta = beta
        self.lrs: list[float] = []
        self.losses: list[float] = []
        self.average = 0.0
        self.best = 0.0

    def on_train_batch_start(
        self, trainer: TrainerView, module: TrainModule, batch: Any, batch_idx: int
    ) -> None:
        if (batch_idx + 1) % trainer.accumulate_grad_batches == 0:
            self.lrs.append(trainer.optimizers[0].param_groups[0]["lr"])

    def on_train_batch_end(
        self,
        trainer: TrainerView,
        module: TrainModule,
        outputs: STEP_OUTPUT,
        batch: Any,
        batch_idx: int,
    ) -> None:
        accumulate = trainer.accumulate_grad_batches
        if (batch_idx + 1) % accumulate != 0:
            return
        loss = extract_loss(outputs)
        if loss is None:  # a skipped batch: no point, but the rate list stays aligned
            self.losses.append(float("nan"))
            return
        step = trainer.global_step - self.start_step  # 1 after the first step
        self.average = self.beta * self.average + (1 - self.beta) * loss.item() / accumulate
        smoothed = self.average / (1 - self.beta ** (step + 1))
        threshold = self.early_stop_threshold
        if threshold is not None and step > 1 and smoothed > threshold * self.best:
            trainer.should_stop = True
        trainer.should_stop = trainer.strategy.broadcast(trainer.should_stop)  # rank 0's
        if smoothed < self.best or step == 1:
            self.best = smoothed
        self.losses.append(smoothed)


def lr_attribute(model: object, attr_name: str, datamodule: object = None) -> str:
    """The attribute the rate is written to: ``attr_name``, else ``lr`` or ``learning_rate``."""
    if attr_name:
        if not has_attribute(model, attr_name, datamodule):
            raise AttributeError(
                f"The attribute name for the learning rate was set to {attr_name}, but could not "
                "find this as a field in `model` or `model.hparams`; give the model that "
                "attribute or pass the name it has"
            )
        return attr_name
    for name in LR_NAMES:
        if has_attribute(model, name, datamodule):
            return name
    raise AttributeError(
        "When using the learning rate finder, either `model` or `model.hparams` should have one "
        f"of these fields: {LR_NAMES}. If your model has a different name for the learning rate, "
        "set it with `.lr_find(attr_name=...)`."
    )


def lr_find(
    trainer: TunableTrainer,
    model: TrainModule,
    min_lr: float = 1e-8,
    max_lr: float = 1,
    num_training: int = 100,
    mode: str = "exponential",
    early_stop_threshold: float | None = 4.0,
    update_attr: bool = False,
    attr_name: str = "",
) -> LRFinder | None:
    """Run the range test from where the running fit is; None under ``fast_dev_run``."""
    if trainer.fast_dev_run:
        if trainer.is_global_zero:
            warnings.warn("Skipping learning rate finder since `fast_dev_run` is enabled.")
        return None
    state = trainer.run_state
    if update_attr:
        attr_name = lr_attribute(model, attr_name, state.datamodule)
    if len(state.optimizers) != 1:
        raise MisconfigurationError(
            f"`model.configure_optimizers()` returned {len(state.optimizers)}, but learning rate "
            "finder only works with single optimizer"
        )
    finder = LRFinder(mode, min_lr, max_lr, num_training)
    optimizer = state.optimizers[0]
    with Search(state, "lr_find") as search:
        for group in optimizer.param_groups:
            group["lr"] = group["initial_lr"] = min_lr
        scheduler = RangeTestLR(optimizer, max_lr, num_training, mode)
        state.lr_scheduler_configs = [SchedulerConfig(scheduler, interval="step")]
        recorder = LossRecorder(search.start_step, early_stop_threshold)
        state.callbacks = [recorder]
        state.val_loaders = []  # the losses come from training steps: no validation
        state.limits = search.limits(max_steps=search.start_step + num_training)
        state.stepper = TrainingStep(state)  # with the test's scheduler and the recorder's hooks
        FitLoop(state).train()
        steps = trainer.global_step - search.start_step
        diverged = trainer.should_stop
        finder.results = trainer.strategy.broadcast({"lr": recorder.lrs, "loss": recorder.losses})
    if steps != num_training and trainer.is_global_zero:
        if diverged:
            print(f"LR finder stopped early after {steps} steps due to diverging loss.", flush=True)
        else:
            print(
                f"LR finder stopped after {steps} of {num_training} steps: the fit's max_epochs "
                "or max_steps came first (more batches or epochs give more points)",
                flush=True,
            )
    if update_attr:
        suggested = finder.suggestion() if trainer.is_global_zero else None
        suggested = trainer.strategy.broadcast(suggested)  # rank 0 decides for every rank
        if suggested is not None:
            set_attribute(model, attr_name, suggested, state.datamodule)
            for group in optimizer.param_groups:  # the fit goes on at the suggested rate
                group["lr"] = suggested
            if trainer.is_global_zero:
                print(f"Learning rate set to {suggested}", file=sys.stdout, flush=True)
    return finder
