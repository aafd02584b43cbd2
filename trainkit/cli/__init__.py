"""The command line: ``main`` (the ``trainkit`` console script), ``TrainkitCLI`` and Lightning's
``LightningCLI`` API (``from trainkit.cli import LightningCLI``). Each name loads on first use,
so ``trainkit --help`` imports neither torch nor jsonargparse."""

from __future__ import annotations

from typing import TYPE_CHECKING

from trainkit.common.lazy import lazy_exports

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


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, __all__)
