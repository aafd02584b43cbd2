"""Trainer: the public facade. It resolves devices, strategy and precision, owns the run state
and a ``StageRunner`` that runs each stage in this process, picks a launcher when ranks must be
started, and inherits Lightning's read-outs of the run state, one class per concept
(``trainer/readouts/``)."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import timedelta
from pathlib import Path
from typing import Any

from trainkit.callbacks.base import Callback
from trainkit.compiling import compile_options
from trainkit.datamodule import DataModule
from trainkit.devices import resolve_devices
from trainkit.distributed.env import detect_environment
from trainkit.distributed.error_file import install_error_file_hook
from trainkit.distributed.restarts import check_max_restarts
from trainkit.loggers.base import Logger
from trainkit.module import TrainModule
from trainkit.plugins import CheckpointIO, checkpoint_io_from
from trainkit.profilers import build_profiler
from trainkit.scaling import RunSummary
from trainkit.state import TrainerFn
from trainkit.strategies import (
    Placement,
    Strategy,
    select_strategy,
    strategy_from_accelerator,
)
from trainkit.strategies.precision import Precision, normalize_precision
from trainkit.trainer.arguments import (
    NONFINITE,
    Features,
    apply_torch_flags,
    build_callbacks,
    build_loggers,
    check_choice,
    check_num_nodes,
    check_strategy_settings,
    check_writable_dir,
)
from trainkit.trainer.dry_run import BATCHES as DRY_RUN_BATCHES
from trainkit.trainer.limit_arguments import fast_dev_limits, loop_limits
from trainkit.trainer.readouts.callbacks import CallbackReadouts
from trainkit.trainer.readouts.limits import LimitReadouts
from trainkit.trainer.readouts.loaders import LoaderReadouts
from trainkit.trainer.readouts.loggers import LoggerReadouts
from trainkit.trainer.readouts.parts import PartReadouts
from trainkit.trainer.readouts.position import PositionReadouts
from trainkit.trainer.readouts.ranks import RankReadouts
from trainkit.trainer.readouts.settings import SettingsReadouts
from trainkit.trainer.readouts.status import StatusReadouts
from trainkit.trainer.running import StageRunner
from trainkit.trainer.scheduled_fit import fit_under_scheduler
from trainkit.trainer.stage import new_run_state
from trainkit.trainer.stage_settings import StageSettings


def evaluation_method(fn: TrainerFn, loop: str) -> Callable[..., list[dict[str, float]]]:
    """``Trainer.validate`` and ``Trainer.test``: one implementation, Lightning's signature."""

    def evaluate(
        self: Trainer,
        model: TrainModule | None = None,
        dataloaders: object = None,
        ckpt_path: str | None = None,
        verbose: bool = True,
        datamodule: DataModule | None = None,
        weights_only: bool | None = None,
    ) -> list[dict[str, float]]:
        loaders = (dataloaders, verbose)
        return self._runner.launch(fn, model, datamodule, ckpt_path, loaders, weights_only)

    evaluate.__name__ = fn.value
    evaluate.__qualname__ = f"Trainer.{fn.value}"
    evaluate.__doc__ = f"Run the {loop} loop once; returns one metrics dict per dataloader."
    return evaluate


class Trainer(
    StatusReadouts,
    PositionReadouts,
    LimitReadouts,
    LoaderReadouts,
    PartReadouts,
    CallbackReadouts,
    LoggerReadouts,
    RankReadouts,
    SettingsReadouts,
):
    """Train and evaluate a TrainModule on one device or many; every argument has a safe default."""

    def __init__(
        self,
        accelerator: str = "auto",
        devices: str | int | list[int] = "auto",
        num_nodes: int = 1,
        strategy: str | Strategy = "auto",
        precision: str | int | None = None,
        max_epochs: int | None = None,
        min_epochs: int | None = None,
        max_steps: int = -1,
        min_steps: int | None = None,
        max_time: str | dict[str, int] | timedelta | None = None,
        limit_train_batches: int | float | None = None,
        limit_val_batches: int | float | None = None,
        limit_test_batches: int | float | None = None,
        limit_predict_batches: int | float | None = None,
        overfit_batches: int | float = 0.0,
        val_check_interval: int | float | None = None,
        check_val_every_n_epoch: int | None = 1,
        num_sanity_val_steps: int | None = None,
        accumulate_grad_batches: int = 1,
        gradient_clip_val: float | None = None,
        gradient_clip_algorithm: str | None = None,
        log_every_n_steps: int | None = None,
        default_root_dir: str | None = None,
        logger: bool | Logger | list[Logger] | None = True,
        callbacks: list[Callback] | Callback | None = None,
        enable_progress_bar: bool | None = None,
        enable_checkpointing: bool | None = None,
        enable_model_summary: bool | None = None,
        barebones: bool = False,
        deterministic: bool | str | None = None,
        benchmark: bool | None = None,
        inference_mode: bool = True,
        detect_anomaly: bool = False,
        reload_dataloaders_every_n_epochs: int = 0,
        fast_dev_run: bool | int = False,
        compile: bool | str | dict[str, Any] = False,
        use_distributed_sampler: bool = True,
        profiler: str | None = None,
        plugins: list[CheckpointIO] | CheckpointIO | None = None,
        gpus: str | int | list[int] | None = None,
        checkpoint_weights_only: bool = True,
        sync_batchnorm: bool = False,
        lr_scaling: str = "none",
        reference_batch_size: int | None = None,
        batch_size_mode: str = "per_device",
        max_restarts: int = 0,
        dry_run: bool = False,
        nonfinite_loss: str = "stop",
    ) -> None:
        """
        Args:
            accelerator: 'cpu', 'gpu' or 'auto' (GPU when CUDA is available).
            devices: GPUs to use, or CPU processes: 2, [0, 1], '0,1', '0-3', -1 (all), 'auto'.
            num_nodes: Machines in the job; each runs one trainkit launcher.
            strategy: 'auto' (ddp for several devices), or single, ddp, ddp_spawn, dp, ddp2,
                ddp_sharded, fsdp, deepspeed, pipeline, horovod (docs/strategies.md).
            precision: '32', '16-mixed' (GPU) or 'bf16-mixed'.
            max_epochs: Stop after this many epochs (default 1000 unless max_steps is set; -1: no limit).
            min_epochs: Train at least this many epochs even if early stopping asks to stop.
            max_steps: Stop after this many optimizer steps (-1: no limit).
            min_steps: Train at least this many optimizer steps even if early stopping asks to stop.
            max_time: Stop after this much training time: 'DD:HH:MM:SS', {hours: 2}, or a timedelta.
            limit_train_batches: Batches per training epoch: a fraction (float) or a count (int).
            limit_val_batches: Batches per validation run: a fraction or a count.
            limit_test_batches: Batches per test run: a fraction or a count.
            limit_predict_batches: Batches per predict run: a fraction or a count.
            overfit_batches: Train and validate on the same first batches (a fraction or a count),
                unshuffled: a debugging aid to check the model can fit a little data.
            val_check_interval: Validate every fraction of an epoch (float) or every N batches (int).
            check_val_every_n_epoch: Validate every N epochs (None: every val_check_interval
                training batches, counted across epochs).
            num_sanity_val_steps: Validation batches run before training to catch bugs early (-1: all).
            accumulate_grad_batches: Batches whose gradients add up before each optimizer step.
            gradient_clip_val: Clip gradients to this value (None: no clipping).
            gradient_clip_algorithm: 'norm' (total 2-norm) or 'value' (element-wise).
            log_every_n_steps: How often step metrics are written to the loggers.
            default_root_dir: Where logs and checkpoints go (default: the current directory).
            logger: True (TensorBoard; CSV without tensorboard), False, or logger instances.
            callbacks: Callback instances added to the defaults.
            enable_progress_bar: Show progress (rich bars on a terminal, a line per epoch otherwise).
            enable_checkpointing: Save last.ckpt and the best checkpoint each epoch.
            enable_model_summary: Print a per-layer ModelSummary table at fit start (the startup
                table is printed either way).
            barebones: No logger, checkpointing, progress bar or model summary: the leanest loop
                (the startup table and the closing lines are still printed).
            deterministic: Use deterministic algorithms only (True, or 'warn' to only warn).
            benchmark: Set torch.backends.cudnn.benchmark (None: leave it as it is).
            inference_mode: Evaluate under torch.inference_mode (False: torch.no_grad).
            detect_anomaly: Run fit under torch.autograd's anomaly detection (slow; finds NaN origins).
            reload_dataloaders_every_n_epochs: Ask the module/datamodule for new loaders every N
                epochs (0: never).
            fast_dev_run: Run 1 (or N) batches of train/val/test once to smoke-test the code.
            compile: torch.compile the module's forward in each rank: true, a mode
                ('reduce-overhead', 'max-autotune'...) or torch.compile arguments.
            use_distributed_sampler: Give map-style loaders a DistributedSampler under ddp.
            profiler: None, 'simple', 'advanced' or 'pytorch' (a report per stage), or a Profiler.
            plugins: AsyncCheckpointIO() to save checkpoints in the background (default: blocking).
            gpus: Older spelling of devices with accelerator 'gpu'.
            checkpoint_weights_only: Load checkpoints with torch.load(weights_only=True).
            sync_batchnorm: Convert BatchNorm layers to SyncBatchNorm under ddp.
            lr_scaling: Rescale the configured LR for the effective batch: 'none', 'linear', 'sqrt'.
            reference_batch_size: The (effective) batch size the configured LR was tuned at.
            batch_size_mode: 'per_device' (loader batch per rank) or 'effective' (divided by world size).
            max_restarts: Start failed ranks again from the newest last.ckpt, up to N times.
            dry_run: Run a few training and validation batches on every rank, report memory,
                parameters, step time and the run's estimated time; write nothing.
            nonfinite_loss: A NaN/inf loss: 'stop' the fit before its backward (checkpoints stay
                finite), 'warn' once and train on, or 'ignore' (no check: no host read of the
                loss per step, 6-9% more samples/s for a GPU-bound CNN; detect_anomaly implies
                it, for torch to name the operation).
        """
        install_error_file_hook()
        self.precision = normalize_precision(precision)
        accelerator, strategy = strategy_from_accelerator(accelerator, strategy)
        selection = resolve_devices(devices, accelerator, gpus)
        self.cluster = detect_environment()
        self.num_nodes = check_num_nodes(num_nodes)
        placement = Placement(
            selection,
            num_nodes,
            self.cluster,
            self.precision,
            sync_batchnorm,
            gradient_clip_val,
            gradient_clip_algorithm,
        )
        chosen = select_strategy(strategy, placement)
        check_strategy_settings(chosen, lr_scaling, reference_batch_size, batch_size_mode)
        # a dry run runs as fast_dev_run does, a few batches (the first warms up)
        self.fast_dev_run = DRY_RUN_BATCHES if dry_run else int(fast_dev_run)
        limits = loop_limits(  # the configured run's (a dry run estimates it)
            max_epochs=max_epochs,
            min_epochs=min_epochs,
            max_steps=max_steps,
            min_steps=min_steps,
            limit_train_batches=limit_train_batches,
            limit_val_batches=limit_val_batches,
            limit_test_batches=limit_test_batches,
            limit_predict_batches=limit_predict_batches,
            overfit_batches=overfit_batches,
            val_check_interval=val_check_interval,
            check_val_every_n_epoch=check_val_every_n_epoch,
            num_sanity_val_steps=num_sanity_val_steps,
            accumulate_grad_batches=accumulate_grad_batches,
            gradient_clip_val=gradient_clip_val,
            gradient_clip_algorithm=gradient_clip_algorithm,
            log_every_n_steps=log_every_n_steps,
            reload_dataloaders_every_n_epochs=reload_dataloaders_every_n_epochs,
        )
        features = Features.resolve(
            barebones,
            self.fast_dev_run,
            logger=logger,
            progress_bar=enable_progress_bar,
            checkpointing=enable_checkpointing,
            model_summary=enable_model_summary,
        )
        self.default_root_dir = str(default_root_dir or Path.cwd())
        check_writable_dir(self.default_root_dir)
        apply_torch_flags(deterministic, benchmark)
        self.run_state = new_run_state(
            self,
            fast_dev_limits(limits, self.fast_dev_run),
            chosen,
            Precision(
                self.precision,
                chosen.root_device.type,
                chosen.grad_scaler(),
                scales_loss=not chosen.scales_fp16_loss,
            ),
            build_profiler(profiler),
            build_callbacks(callbacks, features, max_time, dry_run),
            build_loggers(features.logger, self.default_root_dir),
            self.default_root_dir,
        )
        self.run_state.inference_mode = inference_mode
        nonfinite = check_choice("trainer.nonfinite_loss", nonfinite_loss, NONFINITE)
        # under detect_anomaly the backward runs, for torch to name the operation that made it
        self.run_state.nonfinite_loss = "ignore" if detect_anomaly else nonfinite
        self.run_state.compile_options = compile_options(compile)
        self.run_state.checkpoint_io = checkpoint_io_from(plugins)
        self.settings = StageSettings(
            selection=selection,
            num_nodes=num_nodes,
            lr_scaling=lr_scaling,
            reference_batch_size=reference_batch_size,
            batch_size_mode=batch_size_mode,
            use_distributed_sampler=use_distributed_sampler,
            checkpoint_weights_only=checkpoint_weights_only,
            detect_anomaly=detect_anomaly,
            # the startup table and closing lines: off with the progress bar, kept by barebones
            show_summary=(features.progress_bar or barebones)
            and (dry_run or not self.fast_dev_run),
            dry_run_of=limits if dry_run else None,
            max_restarts=check_max_restarts(max_restarts),
        )
        self.barebones = barebones
        self._runner = StageRunner(self.run_state, self, self.settings)

    def fit(
        self,
        model: TrainModule,
        train_dataloaders: object = None,
        val_dataloaders: object = None,
        datamodule: DataModule | None = None,
        ckpt_path: str | None = None,
        weights_only: bool | None = None,
    ) -> None:
        """Train ``model``; ``ckpt_path`` ('last', 'best' or a path) resumes a previous run;
        ``weights_only``: how it loads (None: ``checkpoint_weights_only``)."""
        with fit_under_scheduler(self, ckpt_path) as ckpt_path:  # early signals, restarts, requeue
            loaders = (train_dataloaders, val_dataloaders)
            self._runner.launch(
                TrainerFn.FITTING, model, datamodule, ckpt_path, loaders, weights_only
            )

    validate = evaluation_method(TrainerFn.VALIDATING, "validation")
    test = evaluation_method(TrainerFn.TESTING, "test")

    def predict(
        self,
        model: TrainModule | None = None,
        dataloaders: object = None,
        datamodule: DataModule | None = None,
        return_predictions: bool | None = None,
        ckpt_path: str | None = None,
        weights_only: bool | None = None,
    ) -> list[Any] | None:
        """Run ``predict_step`` over the predict loader(s); the outputs per batch (or None)."""
        loaders = (dataloaders, return_predictions)
        return self._runner.launch(
            TrainerFn.PREDICTING, model, datamodule, ckpt_path, loaders, weights_only
        )

    def init_module(self, empty_init: bool | None = None) -> AbstractContextManager[Any]:
        """A context to build the module in: on the device, or on the meta device under fsdp
        (each rank then materialises only its shard); ``empty_init=False`` builds it fully."""
        return self.strategy.module_init_context(empty_init)

    def save_checkpoint(
        self, filepath: str, weights_only: bool | None = None, storage_options: object = None
    ) -> None:
        """Write a checkpoint (call on every rank; global rank 0 writes); ``weights_only``:
        without optimizer, scheduler and callback state (it cannot resume a fit)."""
        self._runner.save_checkpoint(filepath, bool(weights_only), storage_options)

    def print(self, *args: object, **kwargs: Any) -> None:
        """``print`` on global rank 0 only."""
        if self.is_global_zero:
            print(*args, **kwargs)

    def log_to_loggers(self, metrics: dict[str, float], step: int) -> None:
        """Send floats to every logger (global rank 0 only); not into ``logged_metrics``."""
        self.run_state.metrics.log_to_loggers(metrics, step, record=False)

    @property
    def run_summary(self) -> RunSummary | None:
        """The startup numbers of the latest fit in this process (None before one)."""
        return self._runner.run_summary

    @property
    def effective_batch_size(self) -> int | None:
        """Samples per optimizer step across every rank (None before the train loader is known)."""
        return self._runner.effective_batch_size
