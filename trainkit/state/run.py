"""RunState: everything a stage's loops read and write, built by the Trainer and passed down."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from trainkit.state.limits import LoopLimits
from trainkit.state.position import LoopPosition
from trainkit.state.protocols import (
    Hooks,
    Metrics,
    PredictRecord,
    RankMarker,
    Stepper,
    StopWatch,
)
from trainkit.state.stop import StopState

if TYPE_CHECKING:
    import torch
    from torch import nn

    from trainkit.callbacks.base import Callback
    from trainkit.datamodule import DataModule
    from trainkit.loggers.base import Logger
    from trainkit.module import TrainModule
    from trainkit.optim import SchedulerConfig
    from trainkit.plugins import CheckpointIO
    from trainkit.profilers.base import Profiler
    from trainkit.strategies.base import Strategy
    from trainkit.strategies.precision import Precision


@dataclass
class RunState:
    """Everything a stage's loops read and write, owned by the Trainer and passed down."""

    limits: LoopLimits
    strategy: Strategy
    precision: Precision
    hooks: Hooks
    metrics: Metrics
    profiler: Profiler
    board: RankMarker  # this rank's
    callbacks: list[Callback] = field(default_factory=list)
    loggers: list[Logger] = field(default_factory=list)
    position: LoopPosition = field(default_factory=LoopPosition)
    stop: StopState = field(default_factory=StopState)
    # what runs, as Lightning's trainer.state says it (trainer/status.py): the Trainer function
    # ('fit', 'validate', 'test', 'predict'), the loop running in it ('train', 'sanity_check',
    # 'validate', 'test', 'predict'; None between stages) and the status ('initializing',
    # 'running', 'finished', 'interrupted')
    stage: str | None = None
    running_stage: str | None = None
    status: str = "initializing"
    module: TrainModule | None = None  # the module of the running stage
    wrapped: nn.Module | None = None  # what the training step runs through (DDP, FSDP, ...)
    datamodule: DataModule | None = None
    optimizers: list[torch.optim.Optimizer] = field(default_factory=list)
    # the configured optimizers' classes, before a strategy wrapped them (horovod's subclass,
    # fairscale's OSS): what a checkpoint records and a resume compares
    optimizer_types: list[type] = field(default_factory=list)
    lr_scheduler_configs: list[SchedulerConfig] = field(default_factory=list)
    train_loader: Any = None  # the user's loader (any iterable), prepared by the strategy
    val_loaders: list[Any] = field(default_factory=list)  # of fit, or of validate
    test_loaders: list[Any] = field(default_factory=list)
    predict_loaders: list[Any] = field(default_factory=list)
    num_eval_batches: int = 0
    ckpt_path: str | None = None  # the checkpoint the running or last stage loaded
    chosen_ckpt_path: str | None = None  # trainer.ckpt_path set by the user: for later stages
    epoch_start_rng: dict[str, Any] | None = (
        None  # RNG states when the current epoch began (for exact resume)
    )
    stepper: Stepper | None = None  # the TrainingStep of the current fit
    preemption: StopWatch | None = None  # the Preemption watching the current fit
    checkpoint_io: CheckpointIO | None = None  # None: an atomic torch.save
    default_root_dir: str = "."
    log_dir: str | None = None  # the run's version_N folder, once agreed by every rank
    created_log_dir: bool = False  # rank 0 made log_dir for this run (it did not exist before)
    cli_config: str | None = None  # the resolved config a CLI run records in checkpoints
    model_callbacks_added: bool = False
    inference_mode: bool = True  # evaluation under torch.inference_mode (else no_grad)
    nonfinite_loss: str = "stop"  # a NaN/inf loss: "stop" the fit, "warn" once, or "ignore"
    # torch.compile's arguments, or a user's compiler (None: off)
    compile_options: dict[str, Any] | Callable[[Any], Any] | None = None
    # kind ('train', 'val', 'test', 'predict') -> that kind's loaders asked for again from the
    # module's or datamodule's hooks (reloading every N epochs, a new batch size); None when the
    # stage was given its loaders
    reload_loaders: Callable[[str], list[Any]] | None = None
    stage_loaders: list[Any] = field(default_factory=list)  # validate/test/predict's, as run
    predict_loop: PredictRecord | None = None  # the latest predict's (predictions, indices)

    # While a stage runs the Trainer has set these handles; the loops read them through the
    # accessors below (once per loop method, never per batch), which say so if one is missing.
    def require_module(self) -> TrainModule:
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
