"""WeightAveraging: a running average of the module's weights (SWA by default, EMA with
``EMAWeightAveraging``), updated after optimizer steps; validation and the end of fit use the
averaged weights, and checkpoints hold them as ``state_dict`` (the trained ones beside them)."""

from __future__ import annotations

import copy
import itertools
from typing import TYPE_CHECKING, Any

import torch
from torch.optim.swa_utils import AveragedModel, get_ema_avg_fn

from trainkit.callbacks.base import Callback
from trainkit.distributed.comm import rank_zero_info
from trainkit.errors import ConfigError

if TYPE_CHECKING:
    from trainkit.common.types import STEP_OUTPUT
    from trainkit.module import TrainModule
    from trainkit.trainer.trainer import Trainer

AVERAGE_PREFIX = "module."  # how AveragedModel names the averaged module's entries


class WeightAveraging(Callback):
    """Average the weights with ``torch.optim.swa_utils.AveragedModel`` (its ``avg_fn`` or
    ``multi_avg_fn`` in ``kwargs``); override ``should_update`` to choose when."""

    def __init__(
        self,
        device: torch.device | str | int | None = None,
        use_buffers: bool = True,
        **kwargs: Any,
    ) -> None:
        """
        Args:
            device: Where the averaged copy lives (default: the module's device; 'cpu' saves GPU memory).
            use_buffers: Average the buffers too (BatchNorm statistics); False: parameters only.
            kwargs: More AveragedModel arguments (avg_fn, multi_avg_fn).
        """
        self._device = torch.device(device) if isinstance(device, str) else device
        self._use_buffers = use_buffers
        self._kwargs = kwargs
        self._average_model: AveragedModel | None = None
        self._latest_update_step = 0  # the global step of the latest update
        self._latest_update_epoch = -1

    def should_update(self, step_idx: int | None = None, epoch_idx: int | None = None) -> bool:
        """Whether to update the average after optimizer step ``step_idx`` (0-based) or at the
        end of epoch ``epoch_idx``; by default after every step."""
        return step_idx is not None

    def setup(self, trainer: Trainer, pl_module: TrainModule, stage: str) -> None:
        if stage != "fit":
            return
        if trainer.strategy.shards_state:
            raise ConfigError(
                "WeightAveraging with the strategy",
                type(trainer.strategy).__name__,
                "a strategy whose ranks hold whole modules (ddp, single...)",
                "the averaged copy needs every weight in one process",
            )
        pl_module.configure_model()  # the layers it builds join the average (it runs once more
        # in the stage's setup: Lightning asks configure_model to be idempotent)
        device = self._device if self._device is not None else pl_module.device
        self._average_model = AveragedModel(
            pl_module, device=device, use_buffers=self._use_buffers, **self._kwargs
        )

    def on_train_batch_end(
        self,
        trainer: Trainer,
        pl_module: TrainModule,
        outputs: STEP_OUTPUT,
        batch: Any,
        batch_idx: int,
    ) -> None:
        step = trainer.global_step
        if step > self._latest_update_step and self.should_update(step_idx=step - 1):
            self._update(pl_module)
            self._latest_update_step = step

    def on_train_epoch_end(self, trainer: Trainer, pl_module: TrainModule) -> None:
        epoch = trainer.current_epoch
        if epoch > self._latest_update_epoch and self.should_update(epoch_idx=epoch):
            self._update(pl_module)
            self._latest_update_epoch = epoch

    def on_train_end(self, trainer: Trainer, pl_module: TrainModule) -> None:
        for average, current in self._pairs(pl_module):
            current.data.copy_(average.data)

    def on_validation_epoch_start(self, trainer: Trainer, pl_module: TrainModule) -> None:
        self._swap(pl_module)

    def on_validation_epoch_end(self, trainer: Trainer, pl_module: TrainModule) -> None:
        self._swap(pl_module)

    def state_dict(self) -> dict[str, Any]:
        return {"latest_update_step": self._latest_update_step}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._latest_update_step = state_dict["latest_update_step"]

    def on_save_checkpoint(
        self, trainer: Trainer, pl_module: TrainModule, checkpoint: dict[str, Any]
    ) -> None:
        """The averaged weights become ``state_dict``; the trained ones go to
        ``current_model_state``, the averaging counters to ``averaging_state``."""
        if self._average_model is None:
            rank_zero_info("WeightAveraging: a checkpoint outside fit holds the module's weights")
            return
        averaged = self._average_model.state_dict()
        checkpoint["current_model_state"] = checkpoint["state_dict"]
        checkpoint["state_dict"] = {
            name.removeprefix(AVERAGE_PREFIX): value
            for name, value in averaged.items()
            if name.startswith(AVERAGE_PREFIX)
        }
        checkpoint["averaging_state"] = {
            name: value for name, value in averaged.items() if not name.startswith(AVERAGE_PREFIX)
        }

    def on_load_checkpoint(
        self, trainer: Trainer, pl_module: TrainModule, checkpoint: dict[str, Any]
    ) -> None:
        """Resume: the average from ``state_dict``, the module's own weights from
        ``current_model_state`` (a checkpoint made without averaging starts both from its weights)."""
        if self._average_model is None:
            return
        if "current_model_state" in checkpoint and "averaging_state" in checkpoint:
            averaged = {AVERAGE_PREFIX + k: v for k, v in checkpoint["state_dict"].items()}
            self._average_model.load_state_dict({**averaged, **checkpoint["averaging_state"]})
            pl_module.load_state_dict(checkpoint["current_model_state"])
        else:
            module = self._average_model.module
            module.load_state_dict(copy.deepcopy(checkpoint["state_dict"]), strict=False)

    def _update(self, pl_module: TrainModule) -> None:
        if self._average_model is None:
            raise RuntimeError("WeightAveraging: no averaged model; fit's setup builds it")
        self._average_model.update_parameters(pl_module)

    def _pairs(self, pl_module: TrainModule) -> list[tuple[torch.Tensor, torch.Tensor]]:
        """(averaged, current) for every parameter and buffer (none before fit's setup)."""
        if self._average_model is None:
            return []
        average = self._average_model.module
        averaged = itertools.chain(average.parameters(), average.buffers())
        current = itertools.chain(pl_module.parameters(), pl_module.buffers())
        return list(zip(averaged, current))

    def _swap(self, pl_module: TrainModule) -> None:
        for average, current in self._pairs(pl_module):
            kept = average.data.clone()
            average.data.copy_(current.data)
            current.data.copy_(kept)


class EMAWeightAveraging(WeightAveraging):
    """An exponential moving average: ``average = decay * average + (1 - decay) * weights``."""

    def __init__(
        self,
        device: torch.device | str | int | None = None,
        use_buffers: bool = True,
        decay: float = 0.999,
        update_every_n_steps: int = 1,
        update_starting_at_step: int | None = None,
        update_starting_at_epoch: int | None = None,
        **kwargs: Any,
    ) -> None:
        """
        Args:
            device: Where the averaged copy lives (default: the module's device).
            use_buffers: Average the buffers too; False: parameters only.
            decay: The weight of the previous average at each update.
            update_every_n_steps: Update after every N-th optimizer step (0: never by steps).
            update_starting_at_step: First step (0-based) that updates (None: the first).
            update_starting_at_epoch: Also update at the end of each epoch from this one on.
            kwargs: More AveragedModel arguments.
        """
        super().__init__(device, use_buffers, avg_fn=get_ema_avg_fn(decay=decay), **kwargs)
        self.update_every_n_steps = update_every_n_steps
        self.update_starting_at_step = update_starting_at_step
        self.update_starting_at_epoch = update_starting_at_epoch

    def should_update(self, step_idx: int | None = None, epoch_idx: int | None = None) -> bool:
        if step_idx is not None:
            started = (
                self.update_starting_at_step is None or step_idx >= self.update_starting_at_step
            )
            every = self.update_every_n_steps
            if started and every > 0 and step_idx % every == 0:
                return True
        start_epoch = self.update_starting_at_epoch
        return epoch_idx is not None and start_epoch is not None and epoch_idx >= start_epoch
