"""The CLI's optimizer and lr_scheduler sections: Lightning's type aliases, the
``ReduceLROnPlateau`` that names its metric, and ``configure_optimizers`` built from a config."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Literal, cast

import torch
from torch.optim import Optimizer
from torch.optim.lr_scheduler import LRScheduler

if TYPE_CHECKING:
    from jsonargparse import Namespace

    from trainkit.module import TrainModule


class ReduceLROnPlateau(torch.optim.lr_scheduler.ReduceLROnPlateau):
    """torch's ReduceLROnPlateau with the metric it follows: ``monitor`` (default val_loss)."""

    def __init__(
        self,
        optimizer: Optimizer,
        monitor: str = "val_loss",
        mode: Literal["min", "max"] = "min",
        factor: float = 0.1,
        patience: int = 10,
        threshold: float = 1e-4,
        threshold_mode: Literal["rel", "abs"] = "rel",
        cooldown: int = 0,
        min_lr: float | list[float] = 0.0,
        eps: float = 1e-8,
    ) -> None:
        """Args:
        monitor: The logged metric the scheduler steps on, e.g. val_loss or train_loss.
        mode: 'min' (the metric should fall) or 'max' (it should rise).
        factor: Multiply the learning rate by this on a plateau.
        patience: Epochs without improvement before the rate drops.
        threshold: The smallest change that counts as an improvement.
        threshold_mode: 'rel' or 'abs' reading of threshold.
        cooldown: Epochs to wait after a drop before counting again.
        min_lr: A floor for the learning rate (one per param group, or one for all).
        eps: Changes smaller than this are not applied.
        """
        super().__init__(
            optimizer, mode, factor, patience, threshold, threshold_mode, cooldown, min_lr, eps
        )
        self.monitor = monitor


LRSchedulerTypeTuple = (LRScheduler, ReduceLROnPlateau)
LRSchedulerTypeUnion = LRScheduler | ReduceLROnPlateau
LRSchedulerType = type[LRScheduler] | type[ReduceLROnPlateau]
OptimizerCallable = Callable[[Iterable], Optimizer]
LRSchedulerCallable = Callable[[Optimizer], LRScheduler | ReduceLROnPlateau]


def instantiate_class(args: object, init: dict[str, Any]) -> Any:
    """Build ``init['class_path'](*args, **init['init_args'])``; ``args``: one value or a tuple."""
    import importlib

    positional = args if isinstance(args, tuple) else (args,)
    module_name, _, class_name = init["class_path"].rpartition(".")
    cls = getattr(importlib.import_module(module_name), class_name)
    return cls(*positional, **init.get("init_args", {}))


def with_class_path(
    class_type: type, init_args: Namespace | dict[str, Any] | None = None
) -> dict[str, Any]:
    """``{'class_path': ..., 'init_args': ...}`` for a section whose class is fixed."""
    path = f"{class_type.__module__}.{class_type.__name__}"
    return {"class_path": path, "init_args": plain(init_args) or {}}


def plain(section: Namespace | dict[str, Any] | None) -> dict[str, Any] | None:
    """A parsed section as a plain dict (None stays None)."""
    if section is None:
        return None
    if hasattr(section, "as_dict"):  # a jsonargparse Namespace
        return cast("Namespace", section).as_dict()
    return dict(cast("dict[str, Any]", section))


def default_configure_optimizers(
    lightning_module: TrainModule,
    optimizer: Optimizer,
    lr_scheduler: LRSchedulerTypeUnion | None = None,
) -> Any:
    """The optimizer alone; with a scheduler ``[optimizer], [scheduler]``; a ReduceLROnPlateau
    steps on its ``monitor`` (torch's own class, which has none, on val_loss)."""
    if lr_scheduler is None:
        return optimizer
    if isinstance(lr_scheduler, torch.optim.lr_scheduler.ReduceLROnPlateau):
        monitor = getattr(lr_scheduler, "monitor", "val_loss")
        return {
            "optimizer": optimizer,
            "lr_scheduler": {"scheduler": lr_scheduler, "monitor": monitor},
        }
    return [optimizer], [lr_scheduler]


class ConfiguredOptimizers:
    """A module's ``configure_optimizers`` built from the config's optimizer / lr_scheduler
    sections; the optimizer is created when the Trainer asks (after the strategy wrapped the
    module), then handed to ``configure`` (``LightningCLI.configure_optimizers``)."""

    def __init__(
        self,
        module: TrainModule,
        optimizer: dict[str, Any],
        scheduler: dict[str, Any] | None,
        configure: Callable[..., Any] = default_configure_optimizers,
    ) -> None:
        self.module = module
        self.optimizer = optimizer
        self.scheduler = scheduler
        self.configure = configure
        self.source = "the optimizer section"  # what the startup table names
        warn_if_overriding(module, optimizer)

    def __call__(self) -> Any:
        optimizer = instantiate_class(self.module.parameters(), self.optimizer)
        scheduler = None if self.scheduler is None else instantiate_class(optimizer, self.scheduler)
        return self.configure(self.module, optimizer=optimizer, lr_scheduler=scheduler)


def overrides_configure_optimizers(module: TrainModule) -> bool:
    """Whether the module's class defines its own ``configure_optimizers`` (not the base's,
    which raises)."""
    from trainkit.module import TrainModule

    defined_by = next(
        (cls for cls in type(module).__mro__ if "configure_optimizers" in vars(cls)), None
    )
    return defined_by is not None and not issubclass(TrainModule, defined_by)


def warn_if_overriding(module: TrainModule, optimizer: dict[str, Any]) -> None:
    """One line (once, from the process that speaks for the job) when the optimizer section
    replaces a ``configure_optimizers`` the module defines, as Lightning warns, naming the
    module's own lr that is then not used."""
    if not overrides_configure_optimizers(module):
        return
    import sys

    from trainkit.cli.checks import says_it_once

    if not says_it_once():
        return
    name = type(module).__name__
    init = optimizer.get("init_args") or {}
    lr = f", lr={init['lr']}" if "lr" in init else ""
    hparams = getattr(module, "hparams", None)
    own = (
        f"; the module's lr={hparams['lr']} (hparams.yaml) is not used"
        if isinstance(hparams, Mapping) and "lr" in hparams
        else ""
    )
    print(
        f"trainkit: warning: {name}.configure_optimizers will be overridden by the optimizer "
        f"section ({optimizer['class_path']}{lr}){own}; remove the optimizer section to use "
        f"{name}'s own",
        file=sys.stderr,
        flush=True,
    )
