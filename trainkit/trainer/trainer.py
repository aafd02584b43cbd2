"""Trainer: owns the strategy, precision, callbacks and loggers; runs fit/validate/test/predict."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import torch

from trainkit.callbacks.base import Callback
from trainkit.checkpoint import state as checkpoint_state
from trainkit.data import as_loader_list, prepare_loader
from trainkit.devices import resolve_devices
from trainkit.distributed import rank_board
from trainkit.distributed.env import detect_environment
from trainkit.distributed.rank_board import RankBoard
from trainkit.errors import ConfigError, MisconfigurationError
from trainkit.loggers.base import Logger
from trainkit.loops.fit import EvalLoop, FitLoop, PredictLoop, bound_hooks
from trainkit.loops.metric_hub import TrainerMetrics
from trainkit.loops.optimizer_step import OptimizerStep
from trainkit.metrics import MetricStore, to_float
from trainkit.module import TrainModule
from trainkit.optim import SchedulerConfig, parse_optimizers
from trainkit.profiler import build_profiler
from trainkit.scaling import RunSummary, effective_batch_size, lr_factor, per_device_batch
from trainkit.strategies import Strategy, select_strategy
from trainkit.strategies.precision import Precision, normalize_precision
from trainkit.trainer.arguments import (
    build_callbacks,
    build_loggers,
    check_loop_settings,
    check_writable_dir,
)
from trainkit.trainer.summary import print_summary, summarize_run

STAGES = ("fit", "validate", "test", "predict")


class Trainer(TrainerMetrics):
    """Train and evaluate a TrainModule on one device or many; every argument has a safe default."""

    def __init__(
        self,
        accelerator: str = "auto",
        devices: int | str | list[int] = "auto",
        num_nodes: int = 1,
        strategy: str | Strategy = "auto",
        precision: str | int = "32",
        max_epochs: int | None = None,
        min_epochs: int = 0,
        max_steps: int = -1,
        limit_train_batches: int | float = 1.0,
        limit_val_batches: int | float = 1.0,
        limit_test_batches: int | float = 1.0,
        limit_predict_batches: int | float = 1.0,
        val_check_interval: int | float = 1.0,
        check_val_every_n_epoch: int = 1,
        num_sanity_val_steps: int = 2,
        accumulate_grad_batches: int = 1,
        gradient_clip_val: float | None = None,
        gradient_clip_algorithm: str = "norm",
        log_every_n_steps: int = 50,
        default_root_dir: str | None = None,
        logger: bool | Logger | list[Logger] = True,
        callbacks: list[Callback] | Callback | None = None,
        enable_progress_bar: bool = True,
        enable_checkpointing: bool = True,
        deterministic: bool = False,
        fast_dev_run: bool | int = False,
        use_distributed_sampler: bool = True,
        profiler: str | None = None,
        gpus: int | str | list[int] | None = None,
        checkpoint_weights_only: bool = True,
        sync_batchnorm: bool = False,
        lr_scaling: str = "none",
        reference_batch_size: int | None = None,
        batch_size_mode: str = "per_device",
    ) -> None:
        """
        Args:
            accelerator: 'cpu', 'gpu' or 'auto' (GPU when CUDA is available).
            devices: GPUs to use, or CPU processes: 2, [0, 1], '0,1', '0-3', -1 (all), 'auto'.
            num_nodes: Machines in the job; each runs one trainkit launcher.
            strategy: 'auto' (ddp for several devices), 'single', 'ddp' or 'ddp_spawn'.
            precision: '32', '16-mixed' (GPU) or 'bf16-mixed'.
            max_epochs: Stop after this many epochs (default 1000 unless max_steps is set; -1: no limit).
            min_epochs: Train at least this many epochs even if early stopping asks to stop.
            max_steps: Stop after this many optimizer steps (-1: no limit).
            limit_train_batches: Batches per training epoch: a fraction (float) or a count (int).
            limit_val_batches: Batches per validation run: a fraction or a count.
            limit_test_batches: Batches per test run: a fraction or a count.
            limit_predict_batches: Batches per predict run: a fraction or a count.
            val_check_interval: Validate every fraction of an epoch (float) or every N batches (int).
            check_val_every_n_epoch: Validate every N epochs.
            num_sanity_val_steps: Validation batches run before training to catch bugs early (-1: all).
            accumulate_grad_batches: Batches whose gradients add up before each optimizer step.
            gradient_clip_val: Clip gradients to this value (None: no clipping).
            gradient_clip_algorithm: 'norm' (total 2-norm) or 'value' (element-wise).
            log_every_n_steps: How often step metrics are written to the loggers.
            default_root_dir: Where logs and checkpoints go (default: the current directory).
            logger: True (TensorBoard + CSV), False, or logger instances.
            callbacks: Callback instances added to the defaults.
            enable_progress_bar: Show progress (rich bars on a terminal, a line per epoch otherwise).
            enable_checkpointing: Save last.ckpt and the best checkpoint each epoch.
            deterministic: Use deterministic algorithms only (torch.use_deterministic_algorithms).
            fast_dev_run: Run 1 (or N) batches of train/val/test once to smoke-test the code.
            use_distributed_sampler: Give map-style loaders a DistributedSampler under ddp.
            profiler: None or 'simple' (per-hook timing table at the end).
            gpus: Older spelling of devices with accelerator 'gpu'.
            checkpoint_weights_only: Load checkpoints with torch.load(weights_only=True).
            sync_batchnorm: Convert BatchNorm layers to SyncBatchNorm under ddp.
            lr_scaling: Rescale the configured LR for the effective batch: 'none', 'linear', 'sqrt'.
            reference_batch_size: The (effective) batch size the configured LR was tuned at.
            batch_size_mode: 'per_device' (loader batch per rank) or 'effective' (divided by world size).
        """
        from trainkit.distributed.error_file import install_error_file_hook

        install_error_file_hook()
        self.precision = normalize_precision(precision)
        self.selection = resolve_devices(devices, accelerator, gpus)
        self.cluster = detect_environment()
        if not isinstance(num_nodes, int) or num_nodes < 1:
            raise ConfigError("trainer.num_nodes", num_nodes, "an int >= 1")
        self.num_nodes = num_nodes
        self.strategy = select_strategy(strategy, self.selection, num_nodes, self.cluster)
        self.precision_plugin = Precision(self.precision, self.strategy.root_device.type)
        self.strategy.sync_batchnorm = sync_batchnorm
        self.strategy.precision = self.precision
        if self.precision_plugin.scaler is not None:
            self.precision_plugin.scaler = (
                self.strategy.grad_scaler() or self.precision_plugin.scaler
            )
        if accumulate_grad_batches > 1 and not self.strategy.supports_accumulation:
            raise ConfigError(
                "trainer.accumulate_grad_batches",
                accumulate_grad_batches,
                f"1 with strategy {self.strategy.name}",
                "use a larger batch instead",
            )
        lr_factor(lr_scaling, reference_batch_size or 1, reference_batch_size)  # validate now
        per_device_batch(self.strategy.world_size, self.strategy.world_size, batch_size_mode)
        self.lr_scaling = lr_scaling
        self.reference_batch_size = reference_batch_size
        self.batch_size_mode = batch_size_mode
        self.run_summary: RunSummary | None = None
        check_loop_settings(
            accumulate_grad_batches=accumulate_grad_batches,
            max_epochs=max_epochs,
            max_steps=max_steps,
            min_epochs=min_epochs,
            num_sanity_val_steps=num_sanity_val_steps,
            gradient_clip_val=gradient_clip_val,
            gradient_clip_algorithm=gradient_clip_algorithm,
            log_every_n_steps=log_every_n_steps,
            check_val_every_n_epoch=check_val_every_n_epoch,
            val_check_interval=val_check_interval,
        )
        if max_epochs == -1:
            max_epochs = math.inf
        self.max_epochs = (
            max_epochs if max_epochs is not None else (1000 if max_steps < 0 else math.inf)
        )
        self.min_epochs = min_epochs
        self.max_steps = max_steps
        self.limit_train_batches = limit_train_batches
        self.limit_val_batches = limit_val_batches
        self.limit_test_batches = limit_test_batches
        self.limit_predict_batches = limit_predict_batches
        self.val_check_interval = val_check_interval
        self.check_val_every_n_epoch = check_val_every_n_epoch
        self.num_sanity_val_steps = num_sanity_val_steps
        self.accumulate_grad_batches = accumulate_grad_batches
        self.gradient_clip_val = gradient_clip_val
        self.gradient_clip_algorithm = gradient_clip_algorithm
        self.log_every_n_steps = log_every_n_steps
        self.default_root_dir = str(default_root_dir or Path.cwd())
        check_writable_dir(self.default_root_dir)
        self.use_distributed_sampler = use_distributed_sampler
        self.checkpoint_weights_only = checkpoint_weights_only
        self.fast_dev_run = int(fast_dev_run)
        if self.fast_dev_run:
            count = self.fast_dev_run
            self.max_epochs, self.max_steps, self.num_sanity_val_steps = 1, count, 0
            self.limit_train_batches = self.limit_val_batches = count
            self.limit_test_batches = self.limit_predict_batches = count
            self.val_check_interval, logger, enable_checkpointing = 1.0, False, False
        if deterministic:
            torch.use_deterministic_algorithms(True)
        self.profiler = build_profiler(profiler)
        self.loggers = build_loggers(logger, self.default_root_dir)
        self.callbacks = build_callbacks(callbacks, enable_progress_bar, enable_checkpointing)
        self._show_summary = enable_progress_bar and not self.fast_dev_run
        # run state
        self.state: str | None = None
        self.current_epoch = 0
        self.global_step = 0
        self.should_stop = False
        self.sanity_checking = False
        self.lightning_module: TrainModule | None = None
        self.datamodule: Any = None
        self.optimizers: list[torch.optim.Optimizer] = []
        self.lr_scheduler_configs: list[SchedulerConfig] = []
        self.train_loader: Any = None
        self.val_loaders: list[Any] = []
        self.num_training_batches: int | float = 0
        self.num_training_batches_seen = 0
        self.num_eval_batches = 0
        self.cli_config: str | None = None
        self._log_dir: str | None = None
        self._wrapped: Any = None
        self._metric_store: MetricStore | None = None
        self._train_store: MetricStore | None = None
        self._epoch_metrics: dict[str, torch.Tensor] = {}
        self._prog_bar_epoch_keys: dict[str, None] = {}
        self._batches_done = 0  # training batches of the current epoch already stepped
        self._epoch_phase: str | None = None  # 'batches' or 'end' while an epoch runs
        self._preemption: Any = None
        self._stepper: OptimizerStep | None = None
        self._board = RankBoard()
        self.preempted: str | None = None  # the stop signal's name once fit saved and stopped
        self._epoch_start_rng: Any = None
        self._resume: dict[str, Any] | None = None
        self._model_callbacks_added = False

    # ---- public API -------------------------------------------------------------------------------
    def fit(
        self,
        model: TrainModule,
        train_dataloaders: Any = None,
        val_dataloaders: Any = None,
        datamodule: Any = None,
        ckpt_path: str | None = None,
    ) -> None:
        """Train ``model``; ``ckpt_path`` ('last', 'best' or a path) resumes a previous run."""
        self._run("fit", model, datamodule, ckpt_path, (train_dataloaders, val_dataloaders))

    def validate(
        self,
        model: TrainModule | None = None,
        dataloaders: Any = None,
        ckpt_path: str | None = None,
        datamodule: Any = None,
        verbose: bool = True,
    ) -> list[dict[str, float]]:
        """Run the validation loop once; returns one metrics dict per dataloader."""
        return self._run("validate", model, datamodule, ckpt_path, (dataloaders, verbose))

    def test(
        self,
        model: TrainModule | None = None,
        dataloaders: Any = None,
        ckpt_path: str | None = None,
        datamodule: Any = None,
        verbose: bool = True,
    ) -> list[dict[str, float]]:
        """Run the test loop once; returns one metrics dict per dataloader."""
        return self._run("test", model, datamodule, ckpt_path, (dataloaders, verbose))

    def predict(
        self,
        model: TrainModule | None = None,
        dataloaders: Any = None,
        datamodule: Any = None,
        ckpt_path: str | None = None,
    ) -> list[Any]:
        """Run ``predict_step`` over the predict loader(s); returns the outputs per batch."""
        return self._run("predict", model, datamodule, ckpt_path, (dataloaders,))

    # ---- properties users and callbacks read ----------------------------------------------------------
    @property
    def world_size(self) -> int:
        return self.strategy.world_size

    @property
    def global_rank(self) -> int:
        return self.strategy.global_rank

    @property
    def local_rank(self) -> int:
        return self.strategy.local_rank

    @property
    def node_rank(self) -> int:
        return self.strategy.node_rank

    @property
    def is_global_zero(self) -> bool:
        return self.strategy.is_global_zero

    @property
    def model(self) -> TrainModule | None:
        return self.lightning_module

    @property
    def log_dir(self) -> str:
        return self._log_dir or self.default_root_dir

    @property
    def logger(self) -> Logger | None:
        return self.loggers[0] if self.loggers else None

    @property
    def checkpoint_callback(self) -> Any:
        from trainkit.callbacks.checkpoint import ModelCheckpoint

        return next((cb for cb in self.callbacks if isinstance(cb, ModelCheckpoint)), None)

    @property
    def fit_done(self) -> bool:
        if self.preempted is not None:
            return True
        if 0 <= self.max_steps <= self.global_step:
            return True
        if self.current_epoch >= self.max_epochs:
            return True
        return self.should_stop and self.current_epoch >= self.min_epochs

    @property
    def is_final_epoch(self) -> bool:
        """Whether the epoch now ending is the last one of this fit."""
        if self.should_stop and self.current_epoch + 1 >= self.min_epochs:
            return True
        return 0 <= self.max_steps <= self.global_step or self.current_epoch + 1 >= self.max_epochs

    @property
    def effective_batch_size(self) -> int | None:
        """Samples per optimizer step across every rank (None before the train loader is known)."""
        batch = getattr(self.train_loader, "batch_size", None)
        if batch is None:
            return None
        devices = self.world_size // self.num_nodes if self.strategy.is_distributed else 1
        return effective_batch_size(
            batch, devices, self.num_nodes, self.accumulate_grad_batches, self.strategy.name
        )

    @property
    def estimated_stepping_batches(self) -> int | float:
        """Total optimizer steps this fit will take (for schedulers like OneCycleLR)."""
        from trainkit.data import limited_batches

        per_epoch = limited_batches(
            self.train_loader, self.limit_train_batches, "limit_train_batches"
        )
        steps = (
            math.ceil(per_epoch / self.accumulate_grad_batches)
            if per_epoch != math.inf
            else math.inf
        )
        total = steps * self.max_epochs if self.max_epochs != math.inf else math.inf
        return min(total, self.max_steps) if self.max_steps >= 0 else total

    # ---- running ----------------------------------------------------------------------------------
    def _run(
        self,
        stage: str,
        model: TrainModule | None,
        datamodule: Any,
        ckpt_path: str | None,
        loaders: tuple,
    ) -> Any:
        model = model if model is not None else self.lightning_module
        if model is None:
            raise MisconfigurationError(
                f"Trainer.{stage}() needs a model; none was given or fitted before"
            )
        if (stage == "fit" and not callable(getattr(type(model), "training_step", None))) or (
            stage == "fit"
            and getattr(type(model), "training_step", None) is TrainModule.training_step
        ):
            raise MisconfigurationError(
                f"{type(model).__name__} defines no training_step; fit needs one"
            )
        from trainkit.distributed.launchers import reexec as launcher

        self.strategy.check_module(model)
        if launcher.needs_launch(self.strategy):
            if launcher.can_reexecute():
                raise SystemExit(launcher.launch_ranks(self.strategy))
            from trainkit.distributed.launchers.spawn import use_forked_ranks

            use_forked_ranks(self)
        if (
            self.strategy.spawns_processes
            and not self.cluster.external
            and self.strategy.world_size > 1
        ):
            from trainkit.distributed.launchers.spawn import spawn_stage

            return spawn_stage(self, stage, model, datamodule, ckpt_path, loaders)
        return self._run_stage(stage, model, datamodule, ckpt_path, loaders)

    def _run_stage(
        self, stage: str, model: TrainModule, datamodule: Any, ckpt_path: str | None, loaders: tuple
    ) -> Any:
        from trainkit.trainer.stage import setup_run, teardown_run

        self.state = stage
        self._board.mark(rank_board.SETUP)
        try:
            setup_run(self, stage, model, datamodule)
            if stage == "fit":
                return self._fit(ckpt_path, *loaders)
            if stage == "predict":
                return self._predict(ckpt_path, *loaders)
            return self._evaluate(stage, ckpt_path, *loaders)
        except BaseException as error:
            for callback in self.callbacks:
                callback.on_exception(self, model, error)
            raise
        finally:
            teardown_run(self, stage)

    def _fit(self, ckpt_path: str | None, train_loaders: Any, val_loaders: Any) -> None:
        module = self.lightning_module
        train = self._loaders("train", train_loaders)
        if not train:
            raise MisconfigurationError(
                "fit needs training data: pass train_dataloaders, a datamodule, or define train_dataloader"
            )
        self.train_loader = train[0]
        self.val_loaders = self._loaders("val", val_loaders)
        if self.limit_val_batches == 0:
            self.val_loaders = []
        self._wrapped = self.strategy.setup_module(module)
        if module.automatic_optimization or defines_optimizers(module):
            self.optimizers, self.lr_scheduler_configs = parse_optimizers(
                module.configure_optimizers()
            )
        self._wrapped, self.optimizers = self.strategy.setup_optimizers(
            self._wrapped, self.optimizers, self.lr_scheduler_configs
        )
        if module.automatic_optimization and len(self.optimizers) > 1:
            raise MisconfigurationError(
                f"{len(self.optimizers)} optimizers need manual optimization: set "
                "self.automatic_optimization = False and step them in training_step"
            )
        self._stepper = OptimizerStep(self)
        self.run_summary = summarize_run(self)
        if ckpt_path is not None:
            checkpoint_state.restore(
                self, checkpoint_state.resolve_path(self, ckpt_path), full=True
            )
        self._log_hyperparams()
        if self.is_global_zero and self._show_summary:
            print_summary(self.run_summary)
        from trainkit.loops.preemption import Preemption

        self.preempted = None
        preemption = self._preemption = Preemption(self)
        try:
            FitLoop(self).run()
        except BaseException:
            preemption.close(settle=False)
            raise
        finally:
            self._preemption = None
        preemption.close()

    def _evaluate(
        self, stage: str, ckpt_path: str | None, dataloaders: Any, verbose: bool
    ) -> list[dict[str, float]]:
        loaders = self._loaders("val" if stage == "validate" else "test", dataloaders)
        if not loaders:
            raise MisconfigurationError(
                f"{stage} needs data: pass dataloaders or a datamodule with one"
            )
        self.lightning_module.to(self.strategy.root_device)
        if ckpt_path is not None:
            checkpoint_state.restore(
                self, checkpoint_state.resolve_path(self, ckpt_path), full=False
            )
        loop_stage = "validation" if stage == "validate" else "test"
        limit = self.limit_val_batches if stage == "validate" else self.limit_test_batches
        results = EvalLoop(self, loop_stage).run(loaders, limit)
        as_floats = [{k: to_float(v) for k, v in r.items()} for r in results]
        if verbose and self.is_global_zero:
            from trainkit.trainer.report import print_metrics

            print_metrics(stage, as_floats)
        return as_floats

    def _predict(self, ckpt_path: str | None, dataloaders: Any) -> list[Any]:
        loaders = self._loaders("predict", dataloaders)
        if not loaders:
            raise MisconfigurationError(
                "predict needs data: pass dataloaders or a datamodule with one"
            )
        self.lightning_module.to(self.strategy.root_device)
        if ckpt_path is not None:
            checkpoint_state.restore(
                self, checkpoint_state.resolve_path(self, ckpt_path), full=False
            )
        outputs = PredictLoop(self).run(loaders, self.limit_predict_batches)
        return outputs[0] if len(outputs) == 1 else outputs

    def _loaders(self, kind: str, given: Any) -> list[Any]:
        if given is None:
            source = self.datamodule if self.datamodule is not None else self.lightning_module
            method = getattr(source, f"{kind}_dataloader", None)
            given = method() if callable(method) else None
        sampler_kwargs = self.strategy.distributed_sampler_kwargs()
        prepared = []
        for loader in as_loader_list(given):
            batch_size = None
            if kind == "train" and getattr(loader, "batch_size", None):
                batch_size = per_device_batch(
                    loader.batch_size, self.world_size, self.batch_size_mode
                )
            prepared.append(
                prepare_loader(
                    loader,
                    sampler_kwargs,
                    kind == "train",
                    self.use_distributed_sampler,
                    batch_size,
                )
            )
        return prepared

    # ---- pieces the loops call ----------------------------------------------------------------------
    def _call(self, name: str, *args: Any) -> None:
        for hook in bound_hooks(self, name):
            hook(*args)

    def _backward(self, loss: torch.Tensor) -> None:
        """``manual_backward``: the same hooks, precision and strategy as automatic optimization."""
        self._stepper.backward(loss)

    def _val_every_n_batches(self) -> int:
        if not self.val_loaders or (self.current_epoch + 1) % self.check_val_every_n_epoch:
            return 0
        total = self.num_training_batches
        if isinstance(self.val_check_interval, int):
            if self.val_check_interval > total:
                raise ConfigError(
                    "trainer.val_check_interval",
                    self.val_check_interval,
                    f"at most the {total} training batches of an epoch",
                    "or a float fraction of the epoch",
                )
            return self.val_check_interval
        if total == math.inf:
            raise MisconfigurationError(
                "val_check_interval as a fraction needs a sized train loader; use an int"
            )
        return max(1, int(total * self.val_check_interval))

    def _run_validation(self) -> None:
        self._board.mark(rank_board.VALIDATION)
        EvalLoop(self, "validation").run(self.val_loaders, self.limit_val_batches)
        self._metric_store = self._train_store

    def _log_hyperparams(self) -> None:
        from trainkit.trainer.stage import log_hyperparams

        log_hyperparams(self)

    # ---- checkpoints ------------------------------------------------------------------------------
    def save_checkpoint(self, path: str) -> None:
        """Write a full checkpoint (call on every rank; global rank 0 writes)."""
        self._board.mark(rank_board.CHECKPOINT)
        self.strategy.save_checkpoint_file(checkpoint_state.dump(self), path)
        self.strategy.barrier()


def defines_optimizers(module: TrainModule) -> bool:
    """Whether the module (its class, or the CLI's optimizer section) provides configure_optimizers."""
    configure = module.configure_optimizers
    return getattr(configure, "__func__", None) is not TrainModule.configure_optimizers
