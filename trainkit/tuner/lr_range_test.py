"""The learning-rate range test: from inside a running fit, train ``num_training`` steps with
the rate rising from ``min_lr`` to ``max_lr``, record the smoothed loss of each, stop early when
it diverges, then put the fit back as it was (``search.py``) and, with ``update_attr``, write
the suggested rate to the model's ``lr``/``learning_rate``. Its result is an ``LRFinder``
(``Tuner.lr_find`` returns it): the rates tried, the smoothed loss at each, the suggested rate
and a plot. The callback that runs it at fit start: ``learning_rate_finder.py``."""

from __future__ import annotations

import math
import sys
import warnings
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import torch

from trainkit.callbacks.base import Callback
from trainkit.errors import MisconfigurationError
from trainkit.loops.fit import FitLoop
from trainkit.loops.training_step import TrainingStep, extract_loss
from trainkit.optim import SchedulerConfig
from trainkit.tuner.attributes import has_attribute, set_attribute
from trainkit.tuner.search import Search
from trainkit.tuner.settings import RANGE_TEST_MODES
from trainkit.tuner.tunable import TunableTrainer

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure, SubFigure

    from trainkit.common.types import STEP_OUTPUT
    from trainkit.module import TrainModule
    from trainkit.trainer.trainer import Trainer
    from trainkit.tuner.settings import RangeTestSettings

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
        self, trainer: Trainer, module: TrainModule, batch: Any, batch_idx: int
    ) -> None:
        if (batch_idx + 1) % trainer.accumulate_grad_batches == 0:
            self.lrs.append(trainer.optimizers[0].param_groups[0]["lr"])

    def on_train_batch_end(
        self,
        trainer: Trainer,
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
    trainer: TunableTrainer, model: TrainModule, settings: RangeTestSettings
) -> LRFinder | None:
    """Run the range test from where the running fit is; None under ``fast_dev_run``."""
    min_lr, max_lr, num_training = settings.min_lr, settings.max_lr, settings.num_training
    mode, update_attr, attr_name = settings.mode, settings.update_attr, settings.attr_name
    if trainer.fast_dev_run:
        if trainer.is_global_zero:
            warnings.warn("Skipping learning rate finder since `fast_dev_run` is enabled.")
        return None
    state = trainer.run_state
    if update_attr:
        attr_name = lr_attribute(model, attr_name, state.given.datamodule)
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
        recorder = LossRecorder(search.start_step, settings.early_stop_threshold)
        # the losses come from training steps: no validation
        state.given = replace(state.given, callbacks=[recorder], val_loaders=[])
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
            set_attribute(model, attr_name, suggested, state.given.datamodule)
            for group in optimizer.param_groups:  # the fit goes on at the suggested rate
                group["lr"] = suggested
            if trainer.is_global_zero:
                print(f"Learning rate set to {suggested}", file=sys.stdout, flush=True)
    return finder


class LRFinder:
    """What an LR range test found: ``results`` holds ``lr`` (the rate of each step) and
    ``loss`` (the smoothed training loss after it); ``suggestion()`` picks a rate."""

    def __init__(self, mode: str, lr_min: float, lr_max: float, num_training: int) -> None:
        if mode not in RANGE_TEST_MODES:
            raise MisconfigurationError(
                f"LR finder mode {mode!r}; expected one of {RANGE_TEST_MODES}: how the rate grows "
                "each step"
            )
        self.mode = mode
        self.lr_min = lr_min
        self.lr_max = lr_max
        self.num_training = num_training
        self.results: dict[str, list[float]] = {}
        self._optimal_idx: int | None = None

    def suggestion(self, skip_begin: int = 10, skip_end: int = 1) -> float | None:
        """The rate where the smoothed loss falls fastest (its steepest negative slope over the
        rates), ignoring the first ``skip_begin`` and last ``skip_end`` steps and non-finite
        losses; None when fewer than two steps are left."""
        self._optimal_idx = self.steepest_index(skip_begin, skip_end)
        if self._optimal_idx is None:
            print(
                "trainkit: failed to compute a learning rate suggestion: fewer than 2 finite "
                f"losses after skipping {skip_begin} at the start and {skip_end} at the end; "
                "raise num_training or give the loader more batches",
                file=sys.stderr,
                flush=True,
            )
            return None
        return self.results["lr"][self._optimal_idx]

    def steepest_index(self, skip_begin: int = 10, skip_end: int = 1) -> int | None:
        """The step ``suggestion`` picks (None: fewer than two finite losses left), silently."""
        import torch

        losses, lrs = self.results.get("loss", []), self.results.get("lr", [])
        kept = [i for i in range(skip_begin, len(losses) - skip_end) if math.isfinite(losses[i])]
        if len(kept) < 2:
            return None
        slope = torch.gradient(
            torch.tensor([losses[i] for i in kept]), spacing=[torch.tensor([lrs[i] for i in kept])]
        )[0]
        return kept[int(torch.argmin(slope))]

    def plot(
        self, suggest: bool = False, show: bool = False, ax: Axes | None = None
    ) -> Figure | SubFigure | None:
        """The loss over the learning rate (log scale for an exponential test) as a matplotlib
        figure, the suggested rate marked in red with ``suggest``; drawn into ``ax`` if given."""
        try:
            import matplotlib.pyplot as plt
        except ImportError as error:
            raise MisconfigurationError(
                "LRFinder.plot needs matplotlib, which is not installed; install it with "
                "`pip install matplotlib`"
            ) from error
        lrs, losses = self.results["lr"], self.results["loss"]
        if ax is None:
            figure, ax = plt.subplots()
        else:
            figure = ax.figure
        ax.plot(lrs, losses)
        if self.mode == "exponential":
            ax.set_xscale("log")
        ax.set_xlabel("Learning rate")
        ax.set_ylabel("Loss")
        if suggest and self.suggestion() is not None and self._optimal_idx is not None:
            index = self._optimal_idx
            ax.plot(lrs[index], losses[index], markersize=10, marker="o", color="red")
        if show:
            plt.show()
        return figure

    def state_dict(self) -> dict[str, Any]:
        """Plain values (for a checkpoint, or a spawned rank's result)."""
        return {
            "mode": self.mode,
            "lr_min": self.lr_min,
            "lr_max": self.lr_max,
            "num_training": self.num_training,
            "results": self.results,
        }

    @classmethod
    def from_state_dict(cls, state: dict[str, Any]) -> LRFinder:
        """The finder ``state_dict`` described."""
        finder = cls(state["mode"], state["lr_min"], state["lr_max"], state["num_training"])
        finder.results = state["results"]
        return finder
