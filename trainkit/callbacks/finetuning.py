"""BaseFinetuning: freeze modules before training and unfreeze them, with their own learning
rates, at chosen epochs; BackboneFinetuning: the common case of a ``backbone`` module."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Generator, Iterable
from typing import TYPE_CHECKING, Any

import torch
from torch import nn
from torch.nn.modules.batchnorm import _BatchNorm

from trainkit.callbacks.base import Callback
from trainkit.distributed.comm import rank_zero_info
from trainkit.errors import MisconfigurationError

if TYPE_CHECKING:
    from trainkit.module import TrainModule
    from trainkit.trainer.trainer import Trainer

Modules = nn.Module | Iterable[nn.Module | Iterable]


class BaseFinetuning(Callback):
    """Freeze modules before training and unfreeze them at chosen epochs (subclass it).

    ``freeze_before_training(module)`` freezes what should wait, and ``finetune_function(module,
    epoch, optimizer)`` (called at every epoch start) unfreezes it, usually with
    ``unfreeze_and_add_param_group``. The added parameter groups and which parameters train are
    kept in checkpoints, so a resumed fit continues with them."""

    def __init__(self) -> None:
        self._internal_optimizer_metadata: dict[int, list[dict[str, Any]]] = {}
        self._trainable: dict[str, bool] = {}  # parameter name -> requires_grad, as saved
        self._tracking: dict[str, bool] = {}  # BatchNorm name -> track_running_stats, as saved
        self._restarting = False

    # ---- what subclasses define ------------------------------------------------------------------
    def freeze_before_training(self, pl_module: nn.Module) -> None:
        """Freeze the modules that train later (e.g. ``self.freeze(pl_module.backbone)``)."""
        raise NotImplementedError

    def finetune_function(
        self, pl_module: nn.Module, epoch: int, optimizer: torch.optim.Optimizer
    ) -> None:
        """At the start of ``epoch``: unfreeze modules, add parameter groups, change rates."""
        raise NotImplementedError

    # ---- tools -----------------------------------------------------------------------------------
    @staticmethod
    def flatten_modules(modules: Modules) -> list[nn.Module]:
        """The leaf modules (and parents holding parameters themselves) of ``modules``."""
        if isinstance(modules, nn.ModuleDict):
            modules = modules.values()
        if isinstance(modules, Iterable):
            found = [m for item in modules for m in BaseFinetuning.flatten_modules(item)]
        else:
            found = list(modules.modules())
        return [m for m in found if not list(m.children()) or list(m.parameters(recurse=False))]

    @staticmethod
    def filter_params(
        modules: Modules, train_bn: bool = True, requires_grad: bool = True
    ) -> Generator[nn.Parameter, None, None]:
        """The parameters of ``modules`` whose requires_grad equals ``requires_grad``
        (BatchNorm layers left out unless ``train_bn``)."""
        for module in BaseFinetuning.flatten_modules(modules):
            if isinstance(module, _BatchNorm) and not train_bn:
                continue
            for param in module.parameters(recurse=False):
                if param.requires_grad == requires_grad:
                    yield param

    @staticmethod
    def make_trainable(modules: Modules) -> None:
        """Unfreeze every parameter of ``modules`` (BatchNorm layers track statistics again)."""
        for module in BaseFinetuning.flatten_modules(modules):
            if isinstance(module, _BatchNorm):
                module.track_running_stats = True
            for param in module.parameters(recurse=False):
                param.requires_grad = True

    @staticmethod
    def freeze_module(module: nn.Module) -> None:
        """Freeze one module's own parameters (a BatchNorm layer stops tracking statistics)."""
        if isinstance(module, _BatchNorm):
            module.track_running_stats = False
        for param in module.parameters(recurse=False):
            param.requires_grad = False

    @staticmethod
    def freeze(modules: Modules, train_bn: bool = True) -> None:
        """Freeze ``modules``; BatchNorm layers stay trainable when ``train_bn``."""
        for module in BaseFinetuning.flatten_modules(modules):
            if isinstance(module, _BatchNorm) and train_bn:
                BaseFinetuning.make_trainable(module)
            else:
                BaseFinetuning.freeze_module(module)

    @staticmethod
    def filter_on_optimizer(
        optimizer: torch.optim.Optimizer, params: Iterable[nn.Parameter]
    ) -> list[nn.Parameter]:
        """``params`` that are not in ``optimizer`` yet (with a warning for those that are)."""
        present = {id(p) for group in optimizer.param_groups for p in group["params"]}
        params = list(params)
        fresh = [p for p in params if id(p) not in present]
        if len(fresh) < len(params):
            warnings.warn(
                "The provided params to be frozen already exist within another group of this "
                "optimizer. Those parameters will be skipped.\nHINT: Did you init your optimizer "
                f"in `configure_optimizer` as such:\n {type(optimizer)}(filter(lambda p: "
                "p.requires_grad, self.parameters()), ...) ",
                UserWarning,
                stacklevel=3,
            )
        return fresh

    @staticmethod
    def unfreeze_and_add_param_group(
        modules: Modules,
        optimizer: torch.optim.Optimizer,
        lr: float | None = None,
        initial_denom_lr: float = 10.0,
        train_bn: bool = True,
    ) -> None:
        """Unfreeze ``modules`` and give their parameters a new group of ``optimizer``, with
        ``lr`` (default: the first group's rate divided by ``initial_denom_lr``)."""
        BaseFinetuning.make_trainable(modules)
        group_lr = optimizer.param_groups[0]["lr"] / initial_denom_lr if lr is None else float(lr)
        params = BaseFinetuning.filter_params(modules, train_bn=train_bn, requires_grad=True)
        params = BaseFinetuning.filter_on_optimizer(optimizer, params)
        if params:
            optimizer.add_param_group({"params": params, "lr": group_lr})

    # ---- hooks -----------------------------------------------------------------------------------
    def setup(self, trainer: Trainer, pl_module: TrainModule, stage: str) -> None:
        self.freeze_before_training(pl_module)
        if not trainer.strategy.supports_param_group_changes:
            raise MisconfigurationError(
                f"{type(self).__name__} does not support the {trainer.strategy.name} strategy "
                "(it owns the optimizer's parameter groups); choose another strategy or remove "
                "the callback"
            )

    def on_load_checkpoint(
        self, trainer: Trainer, pl_module: TrainModule, checkpoint: dict[str, Any]
    ) -> None:
        state = checkpoint.get("callbacks", {}).get(self.state_key)
        if state is not None and trainer.optimizers:  # before the optimizer states load
            self.load_state_dict(state)
            self._restore(trainer, pl_module)

    def on_fit_start(self, trainer: Trainer, pl_module: TrainModule) -> None:
        if self._restarting:
            self._restore(trainer, pl_module)

    def on_train_epoch_start(self, trainer: Trainer, pl_module: TrainModule) -> None:
        for index, optimizer in enumerate(trainer.optimizers):
            before = len(optimizer.param_groups)
            self.finetune_function(pl_module, trainer.current_epoch, optimizer)
            self._remember(pl_module, index, before, optimizer.param_groups)

    # ---- state -----------------------------------------------------------------------------------
    def on_save_checkpoint(
        self, trainer: Trainer, pl_module: TrainModule, checkpoint: dict[str, Any]
    ) -> None:
        state = checkpoint.get("callbacks", {}).get(self.state_key)
        if state is not None:  # which parameters train now, and which BatchNorms track
            state["trainable_parameters"] = {
                name: p.requires_grad for name, p in pl_module.named_parameters()
            }
            state["batchnorm_tracking"] = {
                name: m.track_running_stats
                for name, m in pl_module.named_modules()
                if isinstance(m, _BatchNorm)
            }

    def state_dict(self) -> dict[str, Any]:
        return {"internal_optimizer_metadata": self._internal_optimizer_metadata}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        metadata = state_dict.get("internal_optimizer_metadata", {})
        self._restarting = self._restarting or metadata != self._internal_optimizer_metadata
        self._internal_optimizer_metadata = metadata
        self._trainable = state_dict.get("trainable_parameters", self._trainable)
        self._tracking = state_dict.get("batchnorm_tracking", self._tracking)

    def _remember(
        self, pl_module: nn.Module, index: int, before: int, groups: list[dict[str, Any]]
    ) -> None:
        """Record the optimizer's parameter groups by parameter name (new ones appended)."""
        names = {p: n for n, p in pl_module.named_parameters()}
        stored = self._internal_optimizer_metadata.get(index)
        if stored is None:
            self._internal_optimizer_metadata[index] = _by_name(groups, names.__getitem__)
        elif len(groups) != before:
            stored.extend(_by_name(groups[before:], names.__getitem__))

    def _restore(self, trainer: Trainer, pl_module: nn.Module) -> None:
        """Rebuild the recorded parameter groups and trainable flags of a resumed fit."""
        params = dict(pl_module.named_parameters())
        for index, optimizer in enumerate(trainer.optimizers):
            stored = self._internal_optimizer_metadata.get(index)
            if stored is not None:
                optimizer.param_groups = _by_name(stored, params.__getitem__)
        for name, trainable in self._trainable.items():
            if name in params:
                params[name].requires_grad = trainable
        modules = dict(pl_module.named_modules())
        for name, tracking in self._tracking.items():
            module = modules.get(name)
            if isinstance(module, _BatchNorm):  # the names were recorded from BatchNorm layers
                module.track_running_stats = tracking
        self._restarting = False


def _by_name(groups: list[dict[str, Any]], mapping: Callable[[Any], Any]) -> list[dict[str, Any]]:
    """Parameter groups with each parameter mapped (to its name, or back to the parameter)."""
    return [
        {
            **{k: v for k, v in group.items() if k != "params"},
            "params": [mapping(p) for p in group["params"]],
        }
        for group in groups
    ]


def multiplicative(epoch: int) -> float:
    """BackboneFinetuning's default factor: double the backbone's rate every epoch."""
    return 2.0


class BackboneFinetuning(BaseFinetuning):
    """Freeze ``pl_module.backbone`` until an epoch, then train it with its own learning rate.

    From ``unfreeze_backbone_at_epoch`` on, the backbone's rate is multiplied by
    ``lambda_func(epoch + 1)`` each epoch."""

    def __init__(
        self,
        unfreeze_backbone_at_epoch: int = 10,
        lambda_func: Callable[[int], float] = multiplicative,
        backbone_initial_ratio_lr: float = 10e-2,
        backbone_initial_lr: float | None = None,
        should_align: bool = True,
        initial_denom_lr: float = 10.0,
        train_bn: bool = True,
        verbose: bool = False,
        rounding: int = 12,
    ) -> None:
        """
        Args:
            unfreeze_backbone_at_epoch: Epoch at which the backbone starts training.
            lambda_func: Factor applied to the backbone's rate each epoch after that.
            backbone_initial_ratio_lr: Backbone rate at unfreezing, a fraction of the current rate.
            backbone_initial_lr: Backbone rate at unfreezing (overrides the ratio).
            should_align: Never let the backbone's rate exceed the rest of the model's.
            initial_denom_lr: Divides the default rate of an added parameter group.
            train_bn: Train the backbone's BatchNorm layers even while it is frozen.
            verbose: Print the rates at every epoch start.
            rounding: Digits of the printed rates.
        """
        super().__init__()
        self.unfreeze_backbone_at_epoch = unfreeze_backbone_at_epoch
        self.lambda_func = lambda_func
        self.backbone_initial_ratio_lr = backbone_initial_ratio_lr
        self.backbone_initial_lr = backbone_initial_lr
        self.should_align = should_align
        self.initial_denom_lr = initial_denom_lr
        self.train_bn = train_bn
        self.verbose = verbose
        self.rounding = rounding
        self.previous_backbone_lr: float | None = None

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "previous_backbone_lr": self.previous_backbone_lr}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.previous_backbone_lr = state_dict.get("previous_backbone_lr")
        super().load_state_dict(state_dict)

    def on_fit_start(self, trainer: Trainer, pl_module: TrainModule) -> None:
        if not isinstance(getattr(pl_module, "backbone", None), nn.Module):
            raise MisconfigurationError(
                f"BackboneFinetuning needs a module attribute `backbone` (an nn.Module); "
                f"{type(pl_module).__name__} has none; add self.backbone or use BaseFinetuning"
            )
        super().on_fit_start(trainer, pl_module)

    def freeze_before_training(self, pl_module: nn.Module) -> None:
        self.freeze(pl_module.backbone)

    def finetune_function(
        self, pl_module: nn.Module, epoch: int, optimizer: torch.optim.Optimizer
    ) -> None:
        current_lr = optimizer.param_groups[0]["lr"]
        if epoch == self.unfreeze_backbone_at_epoch:
            initial = self.backbone_initial_lr
            if initial is None:
                initial = current_lr * self.backbone_initial_ratio_lr
            self.previous_backbone_lr = backbone_lr = initial
            self.unfreeze_and_add_param_group(
                pl_module.backbone,
                optimizer,
                initial,
                train_bn=self.train_bn,
                initial_denom_lr=self.initial_denom_lr,
            )
        elif epoch > self.unfreeze_backbone_at_epoch and self.previous_backbone_lr is not None:
            next_lr = self.lambda_func(epoch + 1) * self.previous_backbone_lr
            if self.should_align and next_lr > current_lr:
                next_lr = current_lr
            optimizer.param_groups[-1]["lr"] = next_lr
            self.previous_backbone_lr = backbone_lr = next_lr
        else:
            return
        if self.verbose:
            rank_zero_info(
                f"Current lr: {round(current_lr, self.rounding)}, "
                f"Backbone lr: {round(backbone_lr, self.rounding)}"
            )
