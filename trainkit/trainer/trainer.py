"""Trainer: resolves devices, strategy and precision, builds the run state, runs a stage."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from trainkit.callbacks.base import Callback
from trainkit.devices import resolve_devices
from trainkit.distributed.env import detect_environment
from trainkit.distributed.launchers.spawn import SpawnLauncher, check_picklable
from trainkit.errors import ConfigError
from trainkit.loggers.base import Logger
from trainkit.module import TrainModule
from trainkit.profiler import build_profiler
from trainkit.scaling import RunSummary
from trainkit.strategies import Placement, Strategy, select_strategy
from trainkit.strategies.precision import Precision, normalize_precision
from trainkit.trainer import spawned
from trainkit.trainer.arguments import (
    build_callbacks,
    build_loggers,
    check_stage_inputs,
    check_strategy_settings,
    check_writable_dir,
    loop_limits,
)
from trainkit.trainer.launching import choose_launcher
from trainkit.trainer.running import StageRunner
from trainkit.trainer.stage import (
    new_run_state,
)


class Trainer(StageRunner):
    """Train and evaluate a TrainModule on one device or many; every argument has a safe default."""

    def __init__(
        self,
        accelerator: str = "auto",
        devices: str | int | list[int] = "auto",
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
        gpus: str | int | list[int] | None = None,
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
        placement = Placement(
            self.selection, num_nodes, self.cluster, self.precision, sync_batchnorm
        )
        chosen = select_strategy(strategy, placement)
        check_strategy_settings(
            chosen,
            accumulate_grad_batches,
            lr_scaling,
            reference_batch_size,
            batch_size_mode,
        )
        self.lr_scaling = lr_scaling
        self.reference_batch_size = reference_batch_size
        self.batch_size_mode = batch_size_mode
        self.run_summary: RunSummary | None = None
        self.fast_dev_run = int(fast_dev_run)
        limits = loop_limits(
            fast_dev_run=self.fast_dev_run,
            max_epochs=max_epochs,
            min_epochs=min_epochs,
            max_steps=max_steps,
            limit_train_batches=limit_train_batches,
            limit_val_batches=limit_val_batches,
            limit_test_batches=limit_test_batches,
            limit_predict_batches=limit_predict_batches,
            val_check_interval=val_check_interval,
            check_val_every_n_epoch=check_val_every_n_epoch,
            num_sanity_val_steps=num_sanity_val_steps,
            accumulate_grad_batches=accumulate_grad_batches,
            gradient_clip_val=gradient_clip_val,
            gradient_clip_algorithm=gradient_clip_algorithm,
            log_every_n_steps=log_every_n_steps,
        )
        if self.fast_dev_run:
            logger, enable_checkpointing = False, False
        self.default_root_dir = str(default_root_dir or Path.cwd())
        check_writable_dir(self.default_root_dir)
        self.use_distributed_sampler = use_distributed_sampler
        self.checkpoint_weights_only = checkpoint_weights_only
        if deterministic:
            torch.use_deterministic_algorithms(True)
        self.run_state = new_run_state(
            self,
            limits,
            chosen,
            Precision(self.precision, chosen.root_device.type, chosen.grad_scaler()),
            build_profiler(profiler),
            build_callbacks(callbacks, enable_progress_bar, enable_checkpointing),
            build_loggers(logger, self.default_root_dir),
            self.default_root_dir,
        )
        self._show_summary = enable_progress_bar and not self.fast_dev_run

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
        data = datamodule if datamodule is not None else self.datamodule
        check_stage_inputs(stage, model, data, loaders)
        self.strategy.check_module(model)
        launcher = choose_launcher(self.strategy)
        if launcher is None:
            return self._run_stage(stage, model, datamodule, ckpt_path, loaders)
        model.trainer = None
        if isinstance(launcher, SpawnLauncher):  # its strategy: ours, or our forked twin
            self.run_state.strategy = launcher.strategy
            named = {"model": model, "datamodule": datamodule, "callbacks": self.callbacks}
            check_picklable({**named, "dataloaders": loaders})
        result = launcher.launch(
            self._run_spawned_rank, stage, model, datamodule, ckpt_path, loaders
        )
        spawned.adopt_rank_result(self.run_state, result, model, datamodule)  # rank 0's
        model.trainer = self
        return result["output"]

    def _run_spawned_rank(
        self,
        strategy: Strategy,
        stage: str,
        model: Any,
        datamodule: Any,
        ckpt_path: Any,
        loaders: tuple,
    ) -> dict[str, Any]:
        """In a spawned rank: run the stage with this rank's strategy; what rank 0 sends back."""
        self.run_state.strategy = strategy
        output = self._run_stage(stage, model, datamodule, ckpt_path, loaders)
        return spawned.rank_result(self.run_state, output)
