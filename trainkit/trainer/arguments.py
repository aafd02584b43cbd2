"""Trainer arguments checked before anything runs (strategy, folders, features, stage inputs), and
the loggers and callbacks they ask for; the loop limits are checked in limit_arguments.py."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterable
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from trainkit.callbacks.base import Callback
from trainkit.errors import ConfigError
from trainkit.loggers.base import Logger

T = TypeVar("T")

if TYPE_CHECKING:
    from trainkit.datamodule import DataModule
    from trainkit.module import TrainModule
    from trainkit.strategies import Strategy


def check_strategy_settings(
    strategy: Strategy,
    lr_scaling: str,
    reference_batch_size: int | None,
    batch_size_mode: str,
) -> None:
    """The batch/LR rules for the chosen strategy's world, checked up front (the strategy checked
    its own settings, and the world a launcher started, when it connected)."""
    from trainkit.scaling import lr_factor, per_device_batch

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


@dataclasses.dataclass(frozen=True)
class Features:
    """What a run writes and shows besides training: loggers, checkpoints, bars, summary."""

    logger: bool | Logger | list[Logger] | None = True
    progress_bar: bool = True
    checkpointing: bool = True
    model_summary: bool = False

    @classmethod
    def resolve(
        cls,
        barebones: bool,
        fast_dev_run: int,
        *,
        logger: bool | Logger | list[Logger] | None,
        progress_bar: bool | None,
        checkpointing: bool | None,
        model_summary: bool | None,
    ) -> Features:
        """The Trainer's switches (None: the default); ``barebones`` turns every one off and
        refuses one explicitly turned on; ``fast_dev_run`` writes no logs or checkpoints."""
        if barebones:
            asked = {
                "logger": logger not in (True, False, None),
                "enable_progress_bar": progress_bar,
                "enable_checkpointing": checkpointing,
                "enable_model_summary": model_summary,
            }
            for name, on in asked.items():
                if on:
                    raise ConfigError(
                        f"trainer.{name}",
                        logger if name == "logger" else on,
                        "off with barebones=True (barebones turns every extra off)",
                        f"remove trainer.{name}, or set barebones: false",
                    )
            return cls(logger=False, progress_bar=False, checkpointing=False)
        off = bool(fast_dev_run)
        return cls(
            logger=False if off else logger,
            progress_bar=progress_bar is not False,
            checkpointing=checkpointing is not False and not off,
            model_summary=bool(model_summary),
        )


NONFINITE = ("stop", "warn", "ignore")  # what a NaN/inf loss does (Trainer nonfinite_loss)


def check_choice(key: str, value: object, choices: tuple[str, ...]) -> str:
    """``value`` if it is one of ``choices`` (``ConfigError`` naming them otherwise)."""
    if value not in choices:
        raise ConfigError(key, value, " or ".join(repr(c) for c in choices))
    return str(value)


def check_num_nodes(num_nodes: object) -> int:
    """``num_nodes``, an int >= 1 (``ConfigError`` otherwise)."""
    if not isinstance(num_nodes, int) or isinstance(num_nodes, bool) or num_nodes < 1:
        raise ConfigError("trainer.num_nodes", num_nodes, "an int >= 1")
    return num_nodes


def apply_torch_flags(deterministic: bool | str | None, benchmark: bool | None) -> None:
    """``deterministic`` (True, or 'warn') and ``benchmark`` into torch's global switches."""
    import torch

    if deterministic not in (None, True, False, "warn"):
        raise ConfigError("trainer.deterministic", deterministic, "true, false, 'warn' or null")
    if deterministic:
        if torch.version.cuda:  # a CUDA build: cuBLAS is deterministic only with a fixed
            # workspace, and without this variable torch raises at the first matmul on the GPU
            # (Lightning sets the same); a value the user set is kept
            os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.use_deterministic_algorithms(True, warn_only=deterministic == "warn")
    if benchmark is not None:
        torch.backends.cudnn.benchmark = benchmark


# the Trainer arguments that take one instance or a list: the argument, its forms, the fix
LISTED: dict[type, tuple[str, str, str]] = {
    Logger: (
        "trainer.logger",
        "true, false, a Logger or a list of Loggers",
        "give logger instances (class_path: TensorBoardLogger in YAML)",
    ),
    Callback: (
        "trainer.callbacks",
        "a Callback or a list of Callbacks",
        "give callback instances (class_path: ModelCheckpoint in YAML)",
    ),
}


def instances_of(kind: type[T], items: object) -> list[T]:
    """One ``kind`` or any sequence of them (a list, a tuple, Hydra's ListConfig) as a list; any
    other item is a ``ConfigError`` on its argument (``LISTED``)."""
    if items is None:
        return []
    listed = [items] if isinstance(items, kind | str) or not isinstance(items, Iterable) else items
    found: list[T] = []
    for item in listed:
        if not isinstance(item, kind):
            raise ConfigError(LISTED[kind][0], item, *LISTED[kind][1:])
        found.append(item)
    return found


def build_loggers(logger: object, root: str) -> list[Logger]:
    """The run's loggers: True (TensorBoard, as Lightning; CSV without tensorboard), False/None,
    or Logger instances (checked); one given no save_dir logs under ``root``."""
    if logger is True:
        return [default_logger(root)]
    if logger in (False, None):
        return []
    loggers = instances_of(Logger, logger)
    for item in loggers:
        if item.follows_root_dir:
            item.save_dir = root
    return loggers


def default_logger(root: str) -> Logger:
    """``logger=True``'s one logger, Lightning's: TensorBoard, or CSV (said once) without it."""
    import importlib.util

    from trainkit.loggers import CSVLogger, TensorBoardLogger

    if importlib.util.find_spec("tensorboard") is not None:
        return TensorBoardLogger(root)
    from lightning_utilities.core.rank_zero import rank_zero_warn

    rank_zero_warn(
        "logger=True logs to CSV: tensorboard is not installed (pip install tensorboard)"
    )
    return CSVLogger(root)


def build_callbacks(
    callbacks: object,
    features: Features,
    max_time: str | dict[str, int] | timedelta | None = None,
    dry_run: bool = False,
) -> list[Callback]:
    """The user's callbacks plus the defaults the features ask for (progress bar,
    checkpointing, model summary, a Timer for ``max_time``, a dry run's probe), in running order."""
    from trainkit import callbacks as builtin

    items = instances_of(Callback, callbacks)

    def missing(kind: type) -> bool:
        return not any(isinstance(cb, kind) for cb in items)

    if features.progress_bar and missing(builtin.ProgressBar):
        items.append(builtin.ProgressBar())
    if features.checkpointing and missing(builtin.Checkpoint):  # any checkpoint callback
        items.append(builtin.ModelCheckpoint())
    if features.model_summary and missing(builtin.ModelSummary):
        items.append(builtin.ModelSummary())
    if max_time is not None and missing(builtin.Timer):
        items.append(builtin.Timer(duration=max_time, interval="step"))
    if dry_run:
        from trainkit.trainer.dry_run import DryRunProbe

        items.append(DryRunProbe())
    return sort_callbacks(items)


def sort_callbacks(items: list[Callback]) -> list[Callback]:
    """Monitoring callbacks last: early stopping, then checkpointing, then the progress bar."""
    return sorted(items, key=lambda cb: getattr(cb, "order", 0))


STAGE_DATA = {"fit": "train", "validate": "val", "test": "test", "predict": "predict"}
STAGE_STEP = {"validate": "validation_step", "test": "test_step", "predict": "predict_step"}


def datamodule_given_as_loaders(
    datamodule: DataModule | None, loaders: tuple
) -> tuple[DataModule | None, tuple]:
    """Lightning's ``fit(model, dm)``: a DataModule passed where the loaders go is the
    datamodule (``datamodule`` and ``loaders`` returned, the DataModule moved over)."""
    from trainkit.datamodule import DataModule

    if loaders and isinstance(loaders[0], DataModule):
        if datamodule is not None:
            raise ConfigError(
                "datamodule", datamodule, "one DataModule", "pass it once, as datamodule="
            )
        return loaders[0], (None, *loaders[1:])
    return datamodule, loaders


def check_stage_inputs(
    stage: str, model: TrainModule | None, datamodule: DataModule | None, loaders: object
) -> None:
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
        defined = getattr(type(model), "forward", None) not in (
            nn.Module.forward,
            TrainModule.forward,
        )
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
    if isinstance(source, DataModule):  # its own method, or a loader from_datasets set
        own = getattr(getattr(source, method, None), "__func__", None)
        has = own is not getattr(DataModule, method, None)
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
