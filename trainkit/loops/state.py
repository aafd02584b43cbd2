"""The run state: one object the Trainer builds and hands to the loops, the training step,
checkpoint dump/restore, preemption and the launchers. A leaf: it imports nothing of trainkit
(not even for types, so nothing can import it in a circle); the parts the loops call through it
are typed by the Protocols below.

Its parts are small dataclasses: where the run is (``LoopPosition``, with its own
``state_dict``), the limits it runs under (``LoopLimits``, frozen), why it stops or resumes
(``StopState``), and handles to the objects the loops drive.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import torch
    from torch import nn


class RankMarker(Protocol):
    """Marks where this rank is on the rank board (distributed/rank_board.py's RankBoard)."""

    def mark(self, phase: int, epoch: int | None = None, batch: int | None = None) -> None: ...


class Hooks(Protocol):
    """Calls the module's and the callbacks' hooks (loops/hooks.py's HookDispatcher)."""

    def bound(self, name: str) -> list[Callable[..., Any]]: ...
    def call(self, name: str, *args: object) -> None: ...
    def call_callbacks(
        self, name: str, *args: object, only: list[Any] | None = None, **kwargs: object
    ) -> None: ...


class Metrics(Protocol):
    """Where ``self.log`` records and what the loggers and callbacks read (the MetricHub)."""

    # The stores are MetricStores (metrics.py), which this leaf may not import; a Protocol of
    # them here would make MetricHub take any such store, so the store parameters stay Any.
    active: Any  # the store self.log records into now
    train_store: Any
    epoch_metrics: dict[str, torch.Tensor]
    logged_metrics: dict[str, float]

    @property
    def callback_metrics(self) -> dict[str, torch.Tensor | float]: ...
    @property
    def progress_bar_metrics(self) -> dict[str, Any]: ...
    def reset(self) -> None: ...
    def new_store(self, stage: str) -> Any: ...
    def new_train_store(self) -> Any: ...
    def record_eval(self, store: Any, results: list[dict[str, torch.Tensor]]) -> None: ...
    def log_step(self, store: Any) -> None: ...
    def reduce_train_epoch(self, store: Any) -> None: ...
    def log_to_loggers(
        self, metrics: dict[str, float], step: int | None = None, epoch: int | None = None
    ) -> None: ...
    def log_eval_step(self, store: Any, loader_idx: int) -> None: ...


class Stepper(Protocol):
    """One training batch: forward, backward, optimizer step (loops/training_step.py)."""

    forward: Callable[[Any, int], Any]

    @property
    def manual_optimizers(self) -> Sequence[Any]:  # loops/manual_optimizer.py
        """What a manually optimized module's ``self.optimizers()`` returns."""
        ...

    def set_accumulation(self, batches: int) -> None: ...
    def run(self, batch: object, batch_idx: int, boundary: bool) -> Any: ...
    def backward(self, loss: torch.Tensor, *args: Any, **kwargs: Any) -> None: ...


class StopWatch(Protocol):
    """Watches for stop signals during a fit (loops/preemption.py's Preemption)."""

    def should_stop(self, can_stop: bool) -> bool: ...
    def save_and_stop(self) -> None: ...
    def settle(self) -> None: ...


@dataclass
class LoopPosition:
    """Where a run is: epoch, optimizer steps, and how far into the current epoch."""

    epoch: int = 0
    global_step: int = 0  # optimizer steps (under manual optimization, every optimizer's step)
    batches_stepped: int = 0  # training batches that ended an optimizer step: the loggers' axis
    batches_done: int = 0  # training batches of the current epoch already stepped
    phase: str | None = None  # while a fit epoch runs: 'batches', then 'end'; else None
    fitting: bool = False  # the stage is fit (a checkpoint then records a partial epoch)
    epoch_batches: int | float = 0  # training batches the current epoch runs (limits applied)
    batches_seen: int = 0  # training batches the last epoch actually ran

    def state_dict(self) -> dict[str, Any]:
        """The loop position a checkpoint records: the epoch, steps, batches done in it, and
        whether it is complete (its end ran over every batch, not cut short by max_steps)."""
        phase = self.phase if self.fitting else None
        batches = self.batches_done if phase else 0
        completed = not self.fitting or (phase == "end" and batches >= self.epoch_batches)
        return {
            "epoch": self.epoch,
            "global_step": self.global_step,
            "batches_stepped": self.batches_stepped,
            "batches_in_epoch": batches,
            "epoch_completed": completed,
        }

    def load_state_dict(self, state: dict[str, Any]) -> int:
        """Continue from a recorded position; returns the batches of the epoch to skip."""
        self.global_step = state["global_step"]
        # checkpoints from before the two counters differed: one step per batch
        self.batches_stepped = state.get("batches_stepped", self.global_step)
        completed = state["epoch_completed"]
        self.epoch = state["epoch"] + (1 if completed else 0)
        self.batches_done, self.phase = 0, None
        return 0 if completed else state["batches_in_epoch"]


@dataclass(frozen=True)
class LoopLimits:
    """How long and how often: the loop settings of the Trainer, checked and frozen."""

    max_epochs: int | float = 1000
    min_epochs: int = 0
    max_steps: int = -1
    min_steps: int = -1
    limit_train_batches: int | float = 1.0
    limit_val_batches: int | float = 1.0
    limit_test_batches: int | float = 1.0
    limit_predict_batches: int | float = 1.0
    val_check_interval: int | float = 1.0
    check_val_every_n_epoch: int | None = 1  # None: val_check_interval counts across epochs
    num_sanity_val_steps: int = 2
    accumulate_grad_batches: int = 1
    gradient_clip_val: float | None = None
    gradient_clip_algorithm: str = "norm"
    log_every_n_steps: int = 50
    overfit_batches: int | float = 0
    reload_dataloaders_every_n_epochs: int = 0

    def limit_for(self, stage: str) -> int | float:
        """The batch limit of a loop stage: train, validation/val, test or predict."""
        key = {"validation": "val", "validate": "val"}.get(stage, stage)
        return getattr(self, f"limit_{key}_batches")

    def steps_per_epoch(self, batches: int | float) -> int | float:
        """Optimizer steps an epoch of ``batches`` training batches takes."""
        if batches == math.inf:
            return math.inf
        return math.ceil(batches / self.accumulate_grad_batches)

    def total_steps(self, batches_per_epoch: int | float) -> int | float:
        """Optimizer steps a whole fit takes (max_epochs and max_steps applied)."""
        per_epoch = self.steps_per_epoch(batches_per_epoch)
        total = per_epoch * self.max_epochs if self.max_epochs != math.inf else math.inf
        return min(total, self.max_steps) if self.max_steps >= 0 else total


@dataclass
class ResumePoint:
    """What a resumed fit restores once its loop starts: RNG states of every rank (at the
    checkpoint and at its epoch's start), the partial epoch's metrics, the batches to skip."""

    rng: list[Any]  # each rank's RNG states (seed.collect_rng_states)
    epoch_rng: list[Any]
    epoch_metrics: list[Any] | None = None
    skip: int = 0


@dataclass
class StopState:
    """Why a fit stops: a callback asked (``should_stop``), a stop signal preempted it (the
    signal's name), or nothing yet; and the resume point of a fit that continues a checkpoint."""

    should_stop: bool = False
    preempted: str | None = None
    resume: ResumePoint | None = None
    resumed_step: int | None = None  # the global step of the checkpoint this fit resumed
    stalled_attempts: int = 0  # earlier resumed attempts in a row that trained too few steps

    def stalled_now(self, global_step: int, min_steps: int) -> int:
        """Resumed attempts in a row that trained fewer than ``min_steps`` steps, this one
        counted if it did (a first attempt, which resumed nothing, never counts)."""
        if self.resumed_step is None or global_step - self.resumed_step >= min_steps:
            return 0
        return self.stalled_attempts + 1


@dataclass
class RunState:
    """Everything a stage's loops read and write, owned by the Trainer and passed down."""

    limits: LoopLimits
    strategy: Any  # the Strategy (strategies/base.py)
    precision: Any  # the Precision plugin (strategies/precision.py)
    hooks: Hooks
    metrics: Metrics
    profiler: Any  # a Profiler (profilers/)
    board: RankMarker  # this rank's
    callbacks: list[Any] = field(default_factory=list)  # Callback instances
    loggers: list[Any] = field(default_factory=list)  # Logger instances
    position: LoopPosition = field(default_factory=LoopPosition)
    stop: StopState = field(default_factory=StopState)
    # what runs, as Lightning's trainer.state says it (trainer/status.py): the Trainer function
    # ('fit', 'validate', 'test', 'predict'), the loop running in it ('train', 'sanity_check',
    # 'validate', 'test', 'predict'; None between stages) and the status ('initializing',
    # 'running', 'finished', 'interrupted')
    stage: str | None = None
    running_stage: str | None = None
    status: str = "initializing"
    module: Any = None  # the TrainModule of the running stage
    wrapped: nn.Module | None = None  # what the training step runs through (DDP, FSDP, ...)
    datamodule: Any = None
    optimizers: list[torch.optim.Optimizer] = field(default_factory=list)
    # the configured optimizers' classes, before a strategy wrapped them (horovod's subclass,
    # fairscale's OSS): what a checkpoint records and a resume compares
    optimizer_types: list[type] = field(default_factory=list)
    lr_scheduler_configs: list[Any] = field(default_factory=list)  # optim.SchedulerConfig
    train_loader: Any = None  # the user's loader (any iterable), prepared by the strategy
    val_loaders: list[Any] = field(default_factory=list)  # of fit, or of validate
    test_loaders: list[Any] = field(default_factory=list)
    predict_loaders: list[Any] = field(default_factory=list)
    num_eval_batches: int = 0
    ckpt_path: str | None = None  # the checkpoint the running or last stage loaded
    chosen_ckpt_path: str | None = None  # trainer.ckpt_path set by the user: for later stages
    epoch_start_rng: Any = None  # RNG states when the current epoch began (for exact resume)
    stepper: Stepper | None = None  # the TrainingStep of the current fit
    preemption: StopWatch | None = None  # the Preemption watching the current fit
    checkpoint_io: Any = None  # the CheckpointIO (None: an atomic torch.save)
    default_root_dir: str = "."
    log_dir: str | None = None  # the run's version_N folder, once agreed by every rank
    created_log_dir: bool = False  # rank 0 made log_dir for this run (it did not exist before)
    cli_config: str | None = None  # the resolved config a CLI run records in checkpoints
    model_callbacks_added: bool = False
    inference_mode: bool = True  # evaluation under torch.inference_mode (else no_grad)
    nonfinite_loss: str = "stop"  # a NaN/inf loss: "stop" the fit, "warn" once, or "ignore"
    compile_options: Any = None  # torch.compile's arguments, or a user's compiler (None: off)
    # kind ('train', 'val', 'test', 'predict') -> that kind's loaders asked for again from the
    # module's or datamodule's hooks (reloading every N epochs, a new batch size); None when the
    # stage was given its loaders
    reload_loaders: Callable[[str], list[Any]] | None = None
    stage_loaders: list[Any] = field(default_factory=list)  # validate/test/predict's, as run
    predict_loop: Any = None  # the PredictLoop of the latest predict (predictions, indices)

    # While a stage runs the Trainer has set these handles; the loops read them through the
    # accessors below (once per loop method, never per batch), which say so if one is missing.
    def require_module(self) -> Any:
        """The TrainModule of the running stage (a RuntimeError before the stage set it up)."""
        if self.module is None:
            raise RuntimeError("no module in the run state: the stage has not set it up yet")
        return self.module

    def require_wrapped(self) -> nn.Module:
        """The model the training step runs through (DDP, FSDP, ... or the module itself)."""
        if self.wrapped is None:
            raise RuntimeError("no wrapped model in the run state: fit has not set it up yet")
        return self.wrapped

    def require_stepper(self) -> Stepper:
        """The training step of the current fit."""
        if self.stepper is None:
            raise RuntimeError("no training step in the run state: fit has not built it yet")
        return self.stepper

    @property
    def sanity_checking(self) -> bool:
        """Whether the validation before fit's first epoch is running."""
        return self.running_stage == "sanity_check"

    @property
    def fit_done(self) -> bool:
        """Whether fit has nothing left to do: preempted, max_steps/max_epochs reached, or
        stopped by a callback once min_epochs ran."""
        if self.stop.preempted is not None:
            return True
        limits, position = self.limits, self.position
        if 0 <= limits.max_steps <= position.global_step:
            return True
        if position.epoch >= limits.max_epochs:
            return True
        return self.stop.should_stop and self.min_trained

    @property
    def min_trained(self) -> bool:
        """Whether min_epochs and min_steps are done, so a callback's stop request counts."""
        limits, position = self.limits, self.position
        return position.epoch >= limits.min_epochs and position.global_step >= limits.min_steps

    @property
    def is_final_epoch(self) -> bool:
        """Whether the epoch now ending is the last one of this fit."""
        limits, position = self.limits, self.position
        if (
            self.stop.should_stop
            and position.epoch + 1 >= limits.min_epochs
            and position.global_step >= limits.min_steps
        ):
            return True
        return (
            0 <= limits.max_steps <= position.global_step or position.epoch + 1 >= limits.max_epochs
        )
