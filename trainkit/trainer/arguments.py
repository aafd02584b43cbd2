"""Trainer arguments checked before anything runs, and the loggers and callbacks they ask for."""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

from trainkit.callbacks.base import Callback
from trainkit.errors import ConfigError
from trainkit.loggers.base import Logger
from trainkit.loops.state import LoopLimits


def loop_limits(fast_dev_run: int = 0, **settings: Any) -> LoopLimits:
    """The Trainer's loop settings, checked (``ConfigError`` names a bad one) and frozen;
    ``fast_dev_run`` N runs N batches of each loop once."""
    check_loop_settings(**{k: v for k, v in settings.items() if not k.startswith("limit_")})
    max_epochs, max_steps = settings["max_epochs"], settings["max_steps"]
    if max_epochs == -1:
        max_epochs = math.inf
    if max_epochs is None:
        max_epochs = 1000 if max_steps < 0 else math.inf
    limits = LoopLimits(**{**settings, "max_epochs": max_epochs})
    if not fast_dev_run:
        return limits
    count = fast_dev_run
    return dataclasses.replace(
        limits,
        max_epochs=1,
        max_steps=count,
        num_sanity_val_steps=0,
        limit_train_batches=count,
        limit_val_batches=count,
        limit_test_batches=count,
        limit_predict_batches=count,
        val_check_interval=1.0,
    )


def check_loop_settings(
    *,
    accumulate_grad_batches: Any,
    max_epochs: Any,
    max_steps: Any,
    min_epochs: Any,
    num_sanity_val_steps: Any,
    gradient_clip_val: Any,
    gradient_clip_algorithm: Any,
    log_every_n_steps: Any,
    check_val_every_n_epoch: Any,
    val_check_interval: Any,
) -> None:
    """Every loop setting in range, or a ConfigError naming it (exit 2 from the CLI)."""
    _check_positive("accumulate_grad_batches", accumulate_grad_batches)
    _check_at_least("max_epochs", max_epochs, -1, "None or -1 (no limit)", none_ok=True)
    _check_at_least("max_steps", max_steps, -1, "-1 (no limit)")
    _check_at_least("min_epochs", min_epochs, 0)
    _check_at_least("num_sanity_val_steps", num_sanity_val_steps, -1, "-1 (all)")
    if gradient_clip_val is not None and not gradient_clip_val >= 0:
        raise ConfigError(
            "trainer.gradient_clip_val",
            gradient_clip_val,
            "a number >= 0 or null (no clipping)",
        )
    _check_positive("log_every_n_steps", log_every_n_steps)
    _check_positive("check_val_every_n_epoch", check_val_every_n_epoch)
    if gradient_clip_algorithm not in ("norm", "value"):
        raise ConfigError(
            "trainer.gradient_clip_algorithm", gradient_clip_algorithm, "'norm' or 'value'"
        )
    if (
        isinstance(val_check_interval, bool)
        or val_check_interval <= 0
        or (isinstance(val_check_interval, float) and val_check_interval > 1)
    ):
        raise ConfigError(
            "trainer.val_check_interval", val_check_interval, "a float in (0, 1] or an int >= 1"
        )


def check_strategy_settings(
    strategy: Any,
    accumulate_grad_batches: int,
    lr_scaling: str,
    reference_batch_size: int | None,
    batch_size_mode: str,
) -> None:
    """Settings that depend on the chosen strategy, and the batch/LR rules, checked up front."""
    from trainkit.scaling import lr_factor, per_device_batch

    if accumulate_grad_batches > 1 and not strategy.supports_accumulation:
        raise ConfigError(
            "trainer.accumulate_grad_batches",
            accumulate_grad_batches,
            f"1 with strategy {strategy.name}",
            "use a larger batch instead",
        )
    lr_factor(lr_scaling, reference_batch_size or 1, reference_batch_size)
    per_device_batch(strategy.world_size, strategy.world_size, batch_size_mode)


def check_writable_dir(folder: str) -> None:
    """Create ``folder`` if needed and prove a file can be written there, or fail in one line."""
    import tempfile

    try:
        Path(folder).mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as err:
        raise ConfigError(
            "trainer.default_root_dir",
            folder,
            "a folder trainkit can write logs and checkpoints to",
            f"{err.strerror or err}; choose another folder",
        ) from None


def _check_at_least(name: str, value: Any, low: int, also: str = "", none_ok: bool = False) -> None:
    if value is None and none_ok:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        expected = f"an int >= {max(low, 0)}" + (f" or {also}" if also else "")
        raise ConfigError(f"trainer.{name}", value, expected)


def _check_positive(name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"trainer.{name}", value, "an int >= 1")


def build_loggers(logger: Any, root: str) -> list[Logger]:
    if logger is True:
        from trainkit.loggers import CSVLogger, TensorBoardLogger

        return [TensorBoardLogger(root), CSVLogger(root)]
    if logger in (False, None):
        return []
    loggers = list(logger) if isinstance(logger, list | tuple) else [logger]
    for item in loggers:
        if not isinstance(item, Logger):
            raise ConfigError("trainer.logger", item, "true, false or Logger instances")
    return loggers


def build_callbacks(callbacks: Any, progress: bool, checkpointing: bool) -> list[Callback]:
    from trainkit.callbacks.checkpoint import ModelCheckpoint
    from trainkit.callbacks.progress import ProgressBar

    items = (
        list(callbacks) if isinstance(callbacks, list | tuple) else [callbacks] if callbacks else []
    )
    for item in items:
        if not isinstance(item, Callback):
            raise ConfigError("trainer.callbacks", item, "Callback instances")
    if progress and not any(isinstance(cb, ProgressBar) for cb in items):
        items.append(ProgressBar())
    if checkpointing and not any(isinstance(cb, ModelCheckpoint) for cb in items):
        items.append(ModelCheckpoint())
    return sort_callbacks(items)


def sort_callbacks(items: list[Callback]) -> list[Callback]:
    """Monitoring callbacks last: early stopping, then checkpointing, then the progress bar."""
    return sorted(items, key=lambda cb: getattr(cb, "order", 0))


STAGE_DATA = {"fit": "train", "validate": "val", "test": "test", "predict": "predict"}
STAGE_STEP = {"validate": "validation_step", "test": "test_step", "predict": "predict_step"}


def check_stage_inputs(stage: str, model: Any, datamodule: Any, loaders: Any) -> None:
    """Before any rank starts: a model that can run ``stage`` (its step method) and data for
    it (dataloaders given, a DataModule, or the model's own ``*_dataloader``)."""
    from torch import nn

    from trainkit.datamodule import DataModule
    from trainkit.errors import MisconfigurationError
    from trainkit.module import TrainModule, defines_training_step

    if model is None:
        raise MisconfigurationError(
            f"Trainer.{stage}() needs a model; none was given or fitted before"
        )
    name = type(model).__name__
    step = STAGE_STEP.get(stage, "training_step")
    defined = (
        defines_training_step(model)
        if stage == "fit"
        else getattr(type(model), step, None) is not getattr(TrainModule, step, None)
    )
    if stage == "predict" and not defined:  # the default predict_step calls forward
        defined = getattr(type(model), "forward", None) is not nn.Module.forward
    if not defined:
        raise MisconfigurationError(
            f"{name} defines no {step}; {stage} needs one; expected a method "
            f"{step}(self, batch, batch_idx){' (or forward)' if stage == 'predict' else ''}; "
            f"add it to {name}"
        )
    method = f"{STAGE_DATA[stage]}_dataloader"
    given = loaders[0] if isinstance(loaders, tuple) and loaders else loaders
    if given is not None:
        return
    source = datamodule if datamodule is not None else model
    if isinstance(source, DataModule):
        has = getattr(type(source), method, None) is not getattr(DataModule, method, None)
    else:
        has = callable(getattr(source, method, None))
    if not has:
        where = (
            f"{type(source).__name__} (the data section)"
            if datamodule is not None
            else (f"there is no data section and {name}")
        )
        raise MisconfigurationError(
            f"{stage} needs {STAGE_DATA[stage]} data; {where} defines no {method}; expected a "
            f"DataModule with {method} (data: class_path: my_package.MyData) or {method} on the "
            f"model; add {method} or a data section"
        )
