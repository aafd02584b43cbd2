"""Callback: hooks called by the Trainer with (trainer, module); every hook is optional.

The hooks receive the Trainer, typed as ``TrainerView`` (callbacks/trainer_view.py: the Protocol
of every public member of the Trainer, kept equal to it by a test), and the user's
``TrainModule``. A Protocol and not the Trainer class: the Trainer builds callbacks, so the
callbacks never name it, not even for a type checker. An override may leave ``trainer``
unannotated (it gets this type) or annotate it ``TrainerView``; one annotated ``trainer:
Trainer`` (a ported ``pl.Trainer``) runs the same, and type-checks under pyright's basic mode,
while mypy and pyright's standard mode report it as narrowing the parameter (docs/compat.md).
``outputs`` is a step's result (``STEP_OUTPUT``) and ``batch`` whatever the user's loader yields:
``Any``, as in Lightning, so an override's unannotated ``batch`` can be unpacked and an annotated
one (``batch: Tensor``) is accepted."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

    from trainkit.callbacks.trainer_view import TrainerView
    from trainkit.module import TrainModule
    from trainkit.utilities.types import STEP_OUTPUT


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

    def setup(self, trainer: TrainerView, pl_module: TrainModule, stage: str) -> None: ...
    def teardown(self, trainer: TrainerView, pl_module: TrainModule, stage: str) -> None: ...
    def on_fit_start(self, trainer: TrainerView, pl_module: TrainModule) -> None: ...
    def on_fit_end(self, trainer: TrainerView, pl_module: TrainModule) -> None: ...
    def on_sanity_check_start(self, trainer: TrainerView, pl_module: TrainModule) -> None: ...
    def on_sanity_check_end(self, trainer: TrainerView, pl_module: TrainModule) -> None: ...
    def on_train_start(self, trainer: TrainerView, pl_module: TrainModule) -> None: ...
    def on_train_end(self, trainer: TrainerView, pl_module: TrainModule) -> None: ...
    def on_train_epoch_start(self, trainer: TrainerView, pl_module: TrainModule) -> None: ...
    def on_train_epoch_end(self, trainer: TrainerView, pl_module: TrainModule) -> None: ...
    def on_train_batch_start(
        self, trainer: TrainerView, pl_module: TrainModule, batch: Any, batch_idx: int
    ) -> None: ...
    def on_train_batch_end(
        self,
        trainer: TrainerView,
        pl_module: TrainModule,
        outputs: STEP_OUTPUT,
        batch: Any,
        batch_idx: int,
    ) -> None: ...
    def on_validation_start(self, trainer: TrainerView, pl_module: TrainModule) -> None: ...
    def on_validation_end(self, trainer: TrainerView, pl_module: TrainModule) -> None: ...
    def on_validation_epoch_start(self, trainer: TrainerView, pl_module: TrainModule) -> None: ...
    def on_validation_epoch_end(self, trainer: TrainerView, pl_module: TrainModule) -> None: ...
    def on_validation_batch_start(
        self,
        trainer: TrainerView,
        pl_module: TrainModule,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None: ...
    def on_validation_batch_end(
        self,
        trainer: TrainerView,
        pl_module: TrainModule,
        outputs: STEP_OUTPUT,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None: ...
    def on_test_start(self, trainer: TrainerView, pl_module: TrainModule) -> None: ...
    def on_test_end(self, trainer: TrainerView, pl_module: TrainModule) -> None: ...
    def on_test_epoch_start(self, trainer: TrainerView, pl_module: TrainModule) -> None: ...
    def on_test_epoch_end(self, trainer: TrainerView, pl_module: TrainModule) -> None: ...
    def on_test_batch_start(
        self,
        trainer: TrainerView,
        pl_module: TrainModule,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None: ...
    def on_test_batch_end(
        self,
        trainer: TrainerView,
        pl_module: TrainModule,
        outputs: STEP_OUTPUT,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None: ...
    def on_predict_start(self, trainer: TrainerView, pl_module: TrainModule) -> None: ...
    def on_predict_end(self, trainer: TrainerView, pl_module: TrainModule) -> None: ...
    def on_predict_epoch_start(self, trainer: TrainerView, pl_module: TrainModule) -> None: ...
    def on_predict_epoch_end(self, trainer: TrainerView, pl_module: TrainModule) -> None: ...
    def on_predict_batch_start(
        self,
        trainer: TrainerView,
        pl_module: TrainModule,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None: ...
    def on_predict_batch_end(
        self,
        trainer: TrainerView,
        pl_module: TrainModule,
        outputs: Any,
        batch: Any,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None: ...
    def on_before_backward(
        self, trainer: TrainerView, pl_module: TrainModule, loss: torch.Tensor
    ) -> None: ...
    def on_after_backward(self, trainer: TrainerView, pl_module: TrainModule) -> None: ...
    def on_before_optimizer_step(
        self, trainer: TrainerView, pl_module: TrainModule, optimizer: torch.optim.Optimizer
    ) -> None: ...
    def on_before_zero_grad(
        self, trainer: TrainerView, pl_module: TrainModule, optimizer: torch.optim.Optimizer
    ) -> None: ...
    def on_save_checkpoint(
        self, trainer: TrainerView, pl_module: TrainModule, checkpoint: dict[str, Any]
    ) -> None: ...
    def on_load_checkpoint(
        self, trainer: TrainerView, pl_module: TrainModule, checkpoint: dict[str, Any]
    ) -> None: ...
    def on_exception(
        self, trainer: TrainerView, pl_module: TrainModule, exception: BaseException
    ) -> None: ...


class Checkpoint(Callback):
    """The base of callbacks that write checkpoints (ModelCheckpoint, OnExceptionCheckpoint)."""


def overrides(obj: object, base: type, hook: str) -> bool:
    """Whether ``obj``'s class redefines ``hook`` (so calling it can do something)."""
    return getattr(type(obj), hook, None) is not getattr(base, hook, None)
