"""The command line: ``main`` (the ``trainkit`` console script), ``TrainkitCLI`` and Lightning's
``LightningCLI`` API (``from trainkit.cli import LightningCLI``). Each name loads on first use,
so ``trainkit --help`` imports neither torch nor jsonargparse."""

from __future__ import annotations

import importlib
from typing import Any

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

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'trainkit.cli' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(__all__)
