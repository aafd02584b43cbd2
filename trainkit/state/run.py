"""RunState: everything a stage's loops read and write, built by the Trainer and passed down.

Split by who writes it: what the stage is given (``given``, a frozen ``StageInputs`` that the
stage runner and the tuner replace whole), what the loops write (``position``, ``stop``,
``trainer_state``, the metrics), and the handles the stage runner sets up (wrapped model,
optimizers, training step)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from trainkit.state.inputs import StageInputs
from trainkit.state.limits import LoopLimits
from trainkit.state.position import LoopPosition
from trainkit.state.stages import RunningStage, TrainerFn, TrainerState
from trainkit.state.stop import StopState

if TYPE_CHECKING:
    import torch
    from torch import nn

    from trainkit.distributed.rank_board import RankBoard
    from trainkit.loops.hooks import HookDispatcher
    from trainkit.loops.metric_hub import MetricHub
    from trainkit.loops.predict import PredictLoop
    from trainkit.loops.preemption import Preemption
    from trainkit.loops.training_step import TrainingStep
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
    hooks: HookDispatcher
    metrics: MetricHub
    profiler: Profiler
    board: RankBoard  # this rank's
    given: StageInputs = field(default_factory=StageInputs)  # replaced whole, never edited
    position: LoopPosition = field(default_factory=LoopPosition)
    stop: StopState = field(default_factory=StopState)
    # what runs, as Lightning's trainer.state says it: the Trainer method, the loop running in it
    # (None between loops) and the status; the stage runner and the loops write it
    trainer_state: TrainerState = field(default_factory=TrainerState)
    wrapped: nn.Module | None = None  # what the training step runs through (DDP, FSDP, ...)
    optimizers: list[torch.optim.Optimizer] = field(default_factory=list)
    # the configured optimizers' classes, before a strategy wrapped them (horovod's subclass,
    # fairscale's OSS): what a checkpoint records and a resume compares
    optimizer_types: list[type] = field(default_factory=list)
    lr_scheduler_configs: list[SchedulerConfig] = field(default_factory=list)
    num_eval_batches: int = 0
    # batches of each loader (limits applied) as the loop of a Trainer method last loaded them
    # (FITTING: fit's validation loaders; VALIDATING; TESTING), read by Lightning's
    # num_val_batches and num_test_batches: none until a loop loads them (loops/fit.py)
    loaded_batches: dict[TrainerFn, list[int | float]] = field(default_factory=dict)
    # the loops of this Trainer call that said their empty loaders (once per loading, as
    # Lightning's has_len_all_ranks; the stage runner clears it)
    said_empty: set[str] = field(default_factory=set)
    ckpt_path: str | None = None  # the checkpoint the running or last stage loaded
    chosen_ckpt_path: str | None = None  # trainer.ckpt_path set by the user: for later stages
    epoch_start_rng: dict[str, Any] | None = (
        None  # RNG states when the current epoch began (for exact resume)
    )
    stepper: TrainingStep | None = None  # the TrainingStep of the current fit
    preemption: Preemption | None = None  # the Preemption watching the current fit
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
    predict_loop: PredictLoop | None = None  # the latest predict's (predictions, indices)

    # While a stage runs the Trainer has set these handles; the loops read them through the
    # accessors below (once per loop method, never per batch), which say so if one is missing.
    def require_module(self) -> TrainModule:
        """The TrainModule of the running stage (a RuntimeError before the stage set it up)."""
        module = self.given.module
        if module is None:
            raise RuntimeError("no module in the run state: the stage has not set it up yet")
        return module

    def require_wrapped(self) -> nn.Module:
        """The model the training step runs through (DDP, FSDP, ... or the module itself)."""
        if self.wrapped is None:
            raise RuntimeError("no wrapped model in the run state: fit has not set it up yet")
        return self.wrapped

    def require_stepper(self) -> TrainingStep:
        """The training step of the current fit."""
        if self.stepper is None:
            raise RuntimeError("no training step in the run state: fit has not built it yet")
        return self.stepper

    @property
    def sanity_checking(self) -> bool:
        """Whether the validation before fit's first epoch is running."""
        return self.trainer_state.stage is RunningStage.SANITY_CHECKING

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
