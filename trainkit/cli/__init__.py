"""The command line: ``main`` (the ``trainkit`` console script), ``TrainkitCLI`` and Lightning's
``LightningCLI`` API (``from trainkit.cli import LightningCLI``). Each name loads on first use,
so ``trainkit --help`` imports neither torch nor jsonargparse."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the same names as _LAZY, for type checkers
    from trainkit.cli.argument_parser import LightningArgumentParser
    from trainkit.cli.command import TrainkitCLI, main
    from trainkit.cli.lightning import ArgsType, LightningCLI
    from trainkit.cli.optimizers import (
        LRSchedulerCallable,
        LRSchedulerType,
        LRSchedulerTypeTuple,
        LRSchedulerTypeUnion,
        OptimizerCallable,
        ReduceLROnPlateau,
        instantiate_class,
    )
    from trainkit.cli.save_config import SaveConfigCallback

_LAZY = {
    "main": "trainkit.cli.command",
    "TrainkitCLI": "trainkit.cli.command",
    "LightningCLI": "trainkit.cli.lightning",
    "ArgsType": "trainkit.cli.lightning",
    "LightningArgumentParser": "trainkit.cli.argument_parser",
    "SaveConfigCallback": "trainkit.cli.save_config",
    "ReduceLROnPlateau": "trainkit.cli.optimizers",
    "LRSchedulerTypeTuple": "trainkit.cli.optimizers",
    "LRSchedulerTypeUnion": "trainkit.cli.optimizers",
    "LRSchedulerType": "trainkit.cli.optimizers",
    "OptimizerCallable": "trainkit.cli.optimizers",
    "LRSchedulerCallable": "trainkit.cli.optimizers",
    "instantiate_class": "trainkit.cli.optimizers",
}

__all__ = [
    "ArgsType",
    "LRSchedulerCallable",
    "LRSchedulerType",
    "LRSchedulerTypeTuple",
    "LRSchedulerTypeUnion",
    "LightningArgumentParser",
    "LightningCLI",
    "OptimizerCallable",
    "ReduceLROnPlateau",
    "SaveConfigCallback",
    "TrainkitCLI",
    "instantiate_class",
    "main",
]


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'trainkit.cli' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
