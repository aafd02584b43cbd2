"""StochasticWeightAveraging: average the weights of the last epochs (torch.optim.swa_utils)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

import torch
from torch import Tensor, nn
from torch.nn.modules.batchnorm import _BatchNorm

from trainkit.callbacks.base import Callback
from trainkit.distributed.comm import rank_zero_info
from trainkit.errors import ConfigError, MisconfigurationError

if TYPE_CHECKING:
    from trainkit.module import TrainModule
    from trainkit.trainer.trainer import Trainer

# (averaged parameter, current parameter, models averaged so far) -> the new average
AverageFn = Callable[[Tensor, Tensor, Tensor | int], Tensor]


class StochasticWeightAveraging(Callback):
    """Average the weights of the last epochs (SWA) and give them to the module when fit ends.

    From ``swa_epoch_start`` on, the learning rate anneals to ``swa_lrs`` (SWALR) and the
    weights at each epoch start join a running average (AveragedModel); when fit reaches
    max_epochs the module gets the averaged weights (BatchNorm statistics recomputed with
    ``update_bn`` over the training data)."""

    def __init__(
        self,
        swa_lrs: float | list[float],
        swa_epoch_start: int | float = 0.8,
        annealing_epochs: int = 10,
        annealing_strategy: Literal["cos", "linear"] = "cos",
        avg_fn: AverageFn | None = None,
        device: torch.device | str | None = "cpu",
    ) -> None:
        """
        Args:
            swa_lrs: The SWA learning rate, one for all parameter groups or one per group.
            swa_epoch_start: The epoch (int, counted from 1) or fraction of max_epochs (float)
                where averaging starts.
            annealing_epochs: Epochs over which the rate anneals to swa_lrs.
            annealing_strategy: 'cos' or 'linear' annealing.
            avg_fn: (averaged, current, n_averaged) -> new average (default: the running mean).
            device: Where the averaged copy lives (None: the module's device).
        """
        if isinstance(swa_epoch_start, bool) or not (
            (isinstance(swa_epoch_start, int) and swa_epoch_start >= 1)
            or (isinstance(swa_epoch_start, float) and 0 <= swa_epoch_start <= 1)
        ):
            raise ConfigError(
                "StochasticWeightAveraging swa_epoch_start",
                swa_epoch_start,
                "an int >= 1 (an epoch) or a float between 0 and 1 (a fraction of max_epochs)",
            )
        lrs = swa_lrs if isinstance(swa_lrs, list) else [swa_lrs]
        if not lrs or any(
            isinstance(lr, bool) or not isinstance(lr, int | float) or lr <= 0 for lr in lrs
        ):
            raise ConfigError(
                "StochasticWeightAveraging swa_lrs", swa_lrs, "a positive float or a list of them"
            )
        if annealing_strategy not in ("cos", "linear"):
            raise ConfigError(
                "StochasticWeightAveraging annealing_strategy",
                annealing_strategy,
                "'cos' or 'linear'",
            )
        if avg_fn is not None and not callable(avg_fn):
            raise ConfigError("StochasticWeightAveraging avg_fn", avg_fn, "a callable or None")
        if device is not None and not isinstance(device, torch.device | str):
            raise ConfigError(
                "StochasticWeightAveraging device", device, "a torch.device, a str or None"
            )
        self._swa_lrs = [float(lr) for lr in lrs] if isinstance(swa_lrs, list) else float(swa_lrs)
        self._swa_epoch_start = swa_epoch_start
        self._annealing_epochs = annealing_epochs
        self._annealing_strategy: Literal["cos", "linear"] = annealing_strategy
        self._avg_fn = avg_fn
        self._device = device
        self._max_epochs: int | None = None
        self._average_model: Any = None  # an AveragedModel, built in setup
        self._swa_scheduler: Any = None
        self._initialized = False
        self._latest_update_epoch = -1
        self._scheduler_state: dict[str, Any] | None = None  # from a checkpoint
        self._average_state: dict[str, Any] | None = None  # from a checkpoint
        self.n_averaged: int = 0

    @property
    def swa_start(self) -> int:
        """The first averaged epoch (counted from 0)."""
        return max(int(self._swa_epoch_start) - 1, 0)

    @property
    def swa_end(self) -> int:
        """The last averaged epoch (counted from 0)."""
        assert self._max_epochs is not None
        return self._max_epochs - 1

    @property
    def average_model(self) -> nn.Module | None:
        """The averaged copy of the module (None before fit)."""
        return None if self._average_model is None else self._average_model.module

    def setup(self, trainer: Trainer, pl_module: TrainModule, stage: str) -> None:
        if stage != "fit":
            return
        if trainer.strategy.shards_state:
            raise MisconfigurationError(
                f"StochasticWeightAveraging does not support the {trainer.strategy.name} "
                "strategy (each rank holds only a part of the weights or optimizer state); use ddp or "
                "one device"
            )
        from torch.optim.swa_utils import AveragedModel

        pl_module.trainer = None  # the copy must not carry the trainer
        try:
            self._average_model = AveragedModel(pl_module, avg_fn=self._avg_fn)
        finally:
            pl_module.trainer = trainer

    def on_fit_start(self, trainer: Trainer, pl_module: TrainModule) -> None:
        if len(trainer.optimizers) != 1:
            raise MisconfigurationError(
                f"StochasticWeightAveraging works with 1 optimizer; found {len(trainer.optimizers)}"
            )
        if len(trainer.lr_scheduler_configs) > 1:
            raise MisconfigurationError(
                "StochasticWeightAveraging works with at most 1 lr_scheduler; found "
                f"{len(trainer.lr_scheduler_configs)}"
            )
        max_epochs = trainer.max_epochs
        if max_epochs is None or max_epochs < 1 or math.isinf(max_epochs):
            raise ConfigError(
                "trainer.max_epochs",
                max_epochs,
                "a finite epoch count with StochasticWeightAveraging",
            )
        self._max_epochs = int(max_epochs)
        if isinstance(self._swa_epoch_start, float):
            self._swa_epoch_start = int(self._max_epochs * self._swa_epoch_start)
        if self._average_state is not None:
            self._average_model.load_state_dict(self._average_state)
            self._average_state = None
        if self._scheduler_state is not None:  # the resumed SWALR replaces the module's scheduler
            trainer.lr_scheduler_configs.clear()

    def on_train_epoch_start(self, trainer: Trainer, pl_module: TrainModule) -> None:
        epoch = trainer.current_epoch
        in_range = self.swa_start <= epoch <= self.swa_end
        if in_range and not self._initialized:
            self._start_averaging(trainer, pl_module)
        if in_range and epoch > self._latest_update_epoch:
            self._average_model.update_parameters(pl_module)
            self.n_averaged = int(self._average_model.n_averaged)
            self._latest_update_epoch = epoch

    def _start_averaging(self, trainer: Trainer, pl_module: TrainModule) -> None:
        from torch.optim.swa_utils import SWALR

        from trainkit.optim import SchedulerConfig

        self._initialized = True
        self._average_model.to(self._device or pl_module.device)
        optimizer = trainer.optimizers[0]
        lrs = self._swa_lrs
        if isinstance(lrs, float):
            lrs = [lrs] * len(optimizer.param_groups)
        self._swa_scheduler = SWALR(
            optimizer,
            # torch annotates swa_lr as float, but SWALR takes one per group too (its docstring)
            swa_lr=lrs,  # pyright: ignore[reportArgumentType]
            anneal_epochs=self._annealing_epochs,
            anneal_strategy=self._annealing_strategy,
        )
        if self._scheduler_state is not None:
            self._swa_scheduler.load_state_dict(self._scheduler_state)
        config = SchedulerConfig(self._swa_scheduler, interval="epoch", frequency=1)
        configs = trainer.lr_scheduler_configs
        if configs:
            rank_zero_info(
                f"Swapping scheduler `{type(configs[0].scheduler).__name__}` for `SWALR`"
            )
            configs[0] = config
        else:
            configs.append(config)

    def on_train_end(self, trainer: Trainer, pl_module: TrainModule) -> None:
        if self._initialized and trainer.current_epoch - 1 == self.swa_end:
            self.transfer_weights(self._average_model.module, pl_module)
            if any(isinstance(m, _BatchNorm) for m in pl_module.modules()):
                from torch.optim.swa_utils import update_bn

                update_bn(trainer.train_loader, pl_module, device=pl_module.device)

    @staticmethod
    def transfer_weights(src: nn.Module, dst: nn.Module) -> None:
        """Copy the parameters of ``src`` into ``dst`` (on ``dst``'s devices)."""
        with torch.no_grad():
            for source, target in zip(src.parameters(), dst.parameters()):
                target.copy_(source.to(target.device))

    def state_dict(self) -> dict[str, Any]:
        average = self._average_model
        return {
            "n_averaged": self.n_averaged,
            "latest_update_epoch": self._latest_update_epoch,
            "scheduler_state": None
            if self._swa_scheduler is None
            else self._swa_scheduler.state_dict(),
            "average_model_state": None if average is None else average.state_dict(),
        }

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.n_averaged = state_dict["n_averaged"]
        self._latest_update_epoch = state_dict["latest_update_epoch"]
        self._scheduler_state = state_dict["scheduler_state"]
        self._average_state = state_dict["average_model_state"]
