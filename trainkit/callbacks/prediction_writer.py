"""BasePredictionWriter: write predictions as they are made (``write_on_batch_end``) and/or
all of a predict at its end (``write_on_epoch_end``), with the dataset indices of each batch,
so the outputs of every rank can be put back in order."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from trainkit.callbacks.base import Callback
from trainkit.common.enums import LightningEnum
from trainkit.errors import ConfigError

if TYPE_CHECKING:
    from trainkit.module import TrainModule
    from trainkit.trainer.trainer import Trainer


class WriteInterval(LightningEnum):
    """When a writer writes: after each batch, at the end, or both."""

    BATCH = "batch"
    EPOCH = "epoch"
    BATCH_AND_EPOCH = "batch_and_epoch"

    @property
    def on_batch(self) -> bool:
        return self in (WriteInterval.BATCH, WriteInterval.BATCH_AND_EPOCH)

    @property
    def on_epoch(self) -> bool:
        return self in (WriteInterval.EPOCH, WriteInterval.BATCH_AND_EPOCH)


class BasePredictionWriter(Callback):
    """Subclass it with ``write_on_batch_end`` and/or ``write_on_epoch_end``."""

    def __init__(
        self, write_interval: Literal["batch", "epoch", "batch_and_epoch"] = "batch"
    ) -> None:
        """
        Args:
            write_interval: 'batch' (after each batch), 'epoch' (once, with every prediction)
                or 'batch_and_epoch'.
        """
        accepted = [interval.value for interval in WriteInterval]
        if write_interval not in accepted:
            raise ConfigError(
                "BasePredictionWriter write_interval", write_interval, f"one of {accepted}"
            )
        self.interval = WriteInterval(write_interval)

    def write_on_batch_end(
        self,
        trainer: Trainer,
        pl_module: TrainModule,
        prediction: Any,
        batch_indices: Sequence[int] | None,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int,
    ) -> None:
        """Write one batch's ``prediction`` (``batch_indices``: its rows in the dataset)."""
        raise NotImplementedError(f"{type(self).__name__} defines no write_on_batch_end")

    def write_on_epoch_end(
        self,
        trainer: Trainer,
        pl_module: TrainModule,
        predictions: Sequence[Any],
        batch_indices: Sequence[Any],
    ) -> None:
        """Write every prediction (one list, or a list per loader) and each batch's indices
        (a list per loader of a list per batch)."""
        raise NotImplementedError(f"{type(self).__name__} defines no write_on_epoch_end")

    def on_predict_batch_end(
        self,
        trainer: Trainer,
        pl_module: TrainModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        if self.interval.on_batch:
            indices = trainer.predict_loop.current_batch_indices
            self.write_on_batch_end(
                trainer, pl_module, outputs, indices, batch, batch_idx, dataloader_idx
            )

    def on_predict_epoch_end(self, trainer: Trainer, pl_module: TrainModule) -> None:
        if self.interval.on_epoch:
            loop = trainer.predict_loop
            self.write_on_epoch_end(trainer, pl_module, loop.predictions, loop.epoch_batch_indices)
