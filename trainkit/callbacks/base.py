"""Callback: hooks called by the Trainer with (trainer, module); every hook is optional.

The hooks receive the ``Trainer`` (named for the type checker only: the Trainer builds the
callbacks, so they never import it at run time) and the user's ``TrainModule``. An override may
leave ``trainer`` unannotated (it gets this type) or annotate it ``trainer: Trainer``, as a
ported Lightning callback does.
``outputs`` is a step's result (``STEP_OUTPUT``) and ``batch`` whatever the user's loader yields:
``Any``, as in Lightning, so an override's unannotated ``batch`` can be unpacked and an annotated
one (``batch: Tensor``) is accepted."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

    from trainkit.common.types import STEP_OUTPUT
    from trainkit.module import TrainModule
    from trainkit.trainer.trainer import Trainer


class Callback:
    """Override only the hooks you need; the Trainer calls only those that are overridden."""

    order = 0  # callbacks with a higher order run later in each hook

    @property
    def state_key(self) -> str:
        """The key of this callback's state in checkpoints."""
        return type(self).__qualname__

    def state_dict(self) -> dict[str, Any]:
        return {}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None: ...

    def setup(self, trainer: Trainer, pl_module: TrainModule, stage: str) -> None: ...
    def teardown(self, trainer: Trainer, pl_module: TrainModule, stage: str) -> None: ...
    def on_fit_start(self, trainer: Trainer, pl_module: TrainModule) -> None: ...
    def on_fit_end(self, trainer: Trainer, pl_module: TrainModule) -> None: ...
    def on_sanity_check_start(self, trainer: Trainer, pl_module: TrainModule) -> None: ...
    def on_sanity_check_end(self, trainer: Trainer, pl_module: TrainModule) -> None: ...
    def on_train_start(self, trainer: Trainer, pl_module: TrainModule) -> None: ...
    def on_train_end(self, trainer: Trainer, pl_module: TrainModule) -> None: ...
    def on_train_epoch_start(self, trainer: Trainer, pl_module: TrainModule) -> None: ...
    def on_train_epoch_end(self, trainer: Trainer, pl_module: TrainModule) -> None: ...
    def on_train_batch_start(
        self, trainer: Trainer, pl_module: TrainModule, batch: Any, batch_idx: int
    ) -> None: ...
    def on_train_batch_end(
        self,
        trainer: Trainer,
        pl_module: TrainModule,
        outputs: STEP_OUTPUT,
        batch: Any,
        batch_idx: int,
    ) -> None: ...
    def on_validation_start(self, trainer: Trainer, pl_module: TrainModule) -> None: ...
    def on_validation_end(self, trainer: Trainer, pl_module: TrainModule) -> None: ...
    def on_validation_epoch_start(self, trainer: Trainer, pl_module: TrainModule) -> None: ...
    def on_validation_epoch_end(self, trainer: Trainer, pl_module: TrainModule) -> None: ...
    def on_validation_batch_start(
        self,
        trainer: Trainer,
        pl_module: TrainModule,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None: ...
    def on_validation_batch_end(
        self,
        trainer: Trainer,
        pl_module: TrainModule,
        outputs: STEP_OUTPUT,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None: ...
    def on_test_start(self, trainer: Trainer, pl_module: TrainModule) -> None: ...
    def on_test_end(self, trainer: Trainer, pl_module: TrainModule) -> None: ...
    def on_test_epoch_start(self, trainer: Trainer, pl_module: TrainModule) -> None: ...
    def on_test_epoch_end(self, trainer: Trainer, pl_module: TrainModule) -> None: ...
    def on_test_batch_start(
        self,
        trainer: Trainer,
        pl_module: TrainModule,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None: ...
    def on_test_batch_end(
        self,
        trainer: Trainer,
        pl_module: TrainModule,
        outputs: STEP_OUTPUT,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None: ...
    def on_predict_start(self, trainer: Trainer, pl_module: TrainModule) -> None: ...
    def on_predict_end(self, trainer: Trainer, pl_module: TrainModule) -> None: ...
    def on_predict_epoch_start(self, trainer: Trainer, pl_module: TrainModule) -> None: ...
    def on_predict_epoch_end(self, trainer: Trainer, pl_module: TrainModule) -> None: ...
    def on_predict_batch_start(
        self,
        trainer: Trainer,
        pl_module: TrainModule,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None: ...
    def on_predict_batch_end(
        self,
        trainer: Trainer,
        pl_module: TrainModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None: ...
    def on_before_backward(
        self, trainer: Trainer, pl_module: TrainModule, loss: torch.Tensor
    ) -> None: ...
    def on_after_backward(self, trainer: Trainer, pl_module: TrainModule) -> None: ...
    def on_before_optimizer_step(
        self, trainer: Trainer, pl_module: TrainModule, optimizer: torch.optim.Optimizer
    ) -> None: ...
    def on_before_zero_grad(
        self, trainer: Trainer, pl_module: TrainModule, optimizer: torch.optim.Optimizer
    ) -> None: ...
    def on_save_checkpoint(
        self, trainer: Trainer, pl_module: TrainModule, checkpoint: dict[str, Any]
    ) -> None: ...
    def on_load_checkpoint(
        self, trainer: Trainer, pl_module: TrainModule, checkpoint: dict[str, Any]
    ) -> None: ...
    def on_exception(
        self, trainer: Trainer, pl_module: TrainModule, exception: BaseException
    ) -> None: ...


class Checkpoint(Callback):
    """The base of callbacks that write checkpoints (ModelCheckpoint, OnExceptionCheckpoint)."""
