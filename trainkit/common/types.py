"""Lightning's type aliases for annotating a module: what steps return, what
``configure_optimizers`` may return, scheduler configs (``trainkit.utilities.types`` and
``trainkit.fabric.utilities.types`` are their Lightning paths)."""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import (
    TYPE_CHECKING,
    Any,
    NotRequired,
    Protocol,
    Required,
    TypedDict,
    Union,
    runtime_checkable,
)

import torch
from torch import Tensor
from torch.optim import Optimizer
from torch.optim.lr_scheduler import LRScheduler, ReduceLROnPlateau

if TYPE_CHECKING:
    from trainkit.optim import SchedulerConfig as LRSchedulerConfig

__all__ = [
    "EVAL_DATALOADERS",
    "STEP_OUTPUT",
    "TRAIN_DATALOADERS",
    "_DEVICE",
    "_MAP_LOCATION_TYPE",
    "_PATH",
    "DistributedDataParallel",
    "LRSchedulerConfigType",
    "LRSchedulerPLType",
    "LRSchedulerType",
    "LRSchedulerTypeTuple",
    "LRSchedulerTypeUnion",
    "Optimizable",
    "OptimizerConfig",
    "OptimizerLRScheduler",
    "OptimizerLRSchedulerConfig",
    "Steppable",
]

# Lightning Fabric's aliases, which Lightning programs annotate with
_PATH = str | Path
_DEVICE = torch.device | str | int
_MAP_LOCATION_TYPE = (
    _DEVICE | Callable[[torch.UntypedStorage, str], torch.UntypedStorage | None] | dict | None
)

STEP_OUTPUT = Tensor | Mapping[str, Any] | None
TRAIN_DATALOADERS = Any  # any iterable, or a collection of them
EVAL_DATALOADERS = Any

LRSchedulerTypeTuple = (LRScheduler, ReduceLROnPlateau)
LRSchedulerTypeUnion = LRScheduler | ReduceLROnPlateau
LRSchedulerType = type[LRScheduler] | type[ReduceLROnPlateau]
LRSchedulerPLType = LRScheduler | ReduceLROnPlateau


class LRSchedulerConfigType(TypedDict, total=False):
    """The dict form of a scheduler in ``configure_optimizers``."""

    scheduler: Required[LRSchedulerTypeUnion]
    name: str | None
    interval: str
    frequency: int
    reduce_on_plateau: bool
    monitor: str | None
    strict: bool


class OptimizerConfig(TypedDict):
    """``{"optimizer": ...}``."""

    optimizer: Optimizer


class OptimizerLRSchedulerConfig(TypedDict):
    """``{"optimizer": ..., "lr_scheduler": ..., "monitor": ...}``."""

    optimizer: Optimizer
    lr_scheduler: LRSchedulerTypeUnion | LRSchedulerConfigType
    monitor: NotRequired[str]


OptimizerLRScheduler = (
    Optimizer
    | Sequence[Optimizer]
    # the scheduler config class is named for type checkers only: the ground floor imports
    # nothing of trainkit at run time
    | tuple[Sequence[Optimizer], Sequence[Union[LRSchedulerTypeUnion, "LRSchedulerConfig"]]]
    | OptimizerConfig
    | OptimizerLRSchedulerConfig
    | Sequence[OptimizerConfig]
    | Sequence[OptimizerLRSchedulerConfig]
    | None
)


@runtime_checkable
class DistributedDataParallel(Protocol):
    """What a DDP wrapper offers: the wrapped ``module`` and ``no_sync``."""

    module: torch.nn.Module

    @contextmanager
    def no_sync(self) -> Generator[None, None, None]: ...


@runtime_checkable
class Steppable(Protocol):
    """Anything with an optimizer's ``step(closure=None)``."""

    def step(self, closure: Callable[[], Any] | None = ...) -> Any: ...


@runtime_checkable
class Optimizable(Steppable, Protocol):
    """An optimizer's shape: ``step``, ``zero_grad``, ``param_groups``, ``state`` and its
    state dict."""

    param_groups: list[dict[Any, Any]]
    defaults: dict[Any, Any]
    state: Mapping[Any, Any]

    def zero_grad(self, set_to_none: bool = ...) -> None: ...
    def state_dict(self) -> dict[str, Any]: ...
    def load_state_dict(self, state_dict: dict[str, Any]) -> None: ...
