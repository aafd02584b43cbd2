"""TrainModule: the user's model, with Lightning's hook names and ``self.log``."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from types import FrameType
from typing import Any

import torch
from torch import Tensor, nn
from torch.optim import Optimizer
from torch.serialization import MAP_LOCATION

from trainkit.gradients import ParameterToggle, clip_gradients
from trainkit.hparams import AttributeDict, collect_init_args, select_hparams
from trainkit.module_hooks import HooksMixin


class TrainModule(HooksMixin, nn.Module):
    """Subclass this: define training_step and configure_optimizers, the Trainer does the rest."""

    # ``batch`` stays Any in the steps and transfer hooks, as in Lightning: an override narrows it
    # (``batch: list[Tensor]``), which an ``object`` base makes an incompatible override (mypy)

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self.automatic_optimization: bool = True
        self._trainer: Any = None
        self._hparams: AttributeDict = AttributeDict()
        self._log_hyperparams = True
        self._example_input_array: Any = None
        self._toggle = ParameterToggle()
        self.strict_loading = True

    # ---- steps the user defines -------------------------------------------------------------
    def training_step(self, batch: Any, batch_idx: int) -> Tensor | Mapping[str, Any] | None:
        """Compute and return the loss (or a dict with ``"loss"``) for one batch."""
        raise NotImplementedError

    def validation_step(self, batch: Any, batch_idx: int) -> Any:
        """Compute validation metrics for one batch; log them with ``self.log``."""

    def test_step(self, batch: Any, batch_idx: int) -> Any:
        """Compute test metrics for one batch; log them with ``self.log``."""

    def predict_step(self, batch: Any, batch_idx: int) -> Any:
        """Return the prediction for one batch (default: ``self(batch)``)."""
        if isinstance(batch, list | tuple):
            batch = batch[0]
        return self(batch)

    def configure_optimizers(self) -> Any:
        """Return an optimizer, a list of them, or a dict with ``optimizer`` and ``lr_scheduler``."""
        raise NotImplementedError

    def configure_model(self) -> None:
        """Build layers here instead of ``__init__`` to create them sharded (fsdp: on the meta
        device, each rank materialising its own shard); called at every stage's setup, so make
        it idempotent (return if the layers exist)."""

    def configure_callbacks(self) -> list[Any]:
        """Callbacks this model always wants; they are added to the Trainer's."""
        return []

    # ---- hooks with a default behaviour (override to change it) -------------------------------
    def on_validation_model_eval(self) -> None:
        """Enter evaluation for validation (override to keep, e.g., dropout on)."""
        self.eval()

    def on_validation_model_train(self) -> None:
        self.train()

    def on_test_model_eval(self) -> None:
        self.eval()

    def on_test_model_train(self) -> None:
        self.train()

    def on_predict_model_eval(self) -> None:
        self.eval()

    def on_validation_model_zero_grad(self) -> None:
        """Before validation in fit: drop the gradients so evaluation has the memory."""
        self.zero_grad(set_to_none=True)

    def on_before_batch_transfer(self, batch: Any, dataloader_idx: int) -> Any:
        return batch

    def transfer_batch_to_device(
        self, batch: Any, device: torch.device, dataloader_idx: int
    ) -> Any:
        """Move ``batch`` to the module's device (override to move custom batch types)."""
        from trainkit.data import move_to_device

        return move_to_device(batch, device)

    def on_after_batch_transfer(self, batch: Any, dataloader_idx: int) -> Any:
        return batch

    # ---- state the Trainer provides ---------------------------------------------------------
    @property
    def trainer(self) -> Any:
        """The Trainer running this module (attached at the start of each stage)."""
        if self._trainer is None:
            raise RuntimeError(f"{type(self).__name__} is not attached to a Trainer yet")
        return self._trainer

    @trainer.setter
    def trainer(self, trainer: object) -> None:
        object.__setattr__(self, "_trainer", trainer)

    @property
    def device(self) -> torch.device:
        for tensor in self.parameters():
            return tensor.device
        for tensor in self.buffers():
            return tensor.device
        return torch.device("cpu")

    @property
    def dtype(self) -> torch.dtype:
        for tensor in self.parameters():
            return tensor.dtype
        return torch.get_default_dtype()

    @property
    def global_rank(self) -> int:
        return self._trainer.global_rank if self._trainer else 0

    @property
    def local_rank(self) -> int:
        return self._trainer.local_rank if self._trainer else 0

    @property
    def current_epoch(self) -> int:
        return self._trainer.current_epoch if self._trainer else 0

    @property
    def global_step(self) -> int:
        return self._trainer.global_step if self._trainer else 0

    @property
    def hparams(self) -> AttributeDict:
        return self._hparams

    @property
    def log_hyperparams(self) -> bool:
        """Whether loggers receive the hyperparameters (``save_hyperparameters(logger=...)``)."""
        return self._log_hyperparams

    @property
    def on_gpu(self) -> bool:
        """Whether the module's parameters are on a CUDA device."""
        return self.device.type == "cuda"

    @property
    def logger(self) -> Any:
        """The Trainer's first logger (None when there is none)."""
        return self._trainer.logger if self._trainer is not None else None

    @property
    def loggers(self) -> list[Any]:
        """Every logger of the Trainer."""
        return self._trainer.loggers if self._trainer is not None else []

    @property
    def example_input_array(self) -> Any:
        """An input for ``log_graph`` and the model summary (set it in ``__init__``)."""
        return self._example_input_array

    @example_input_array.setter
    def example_input_array(self, example: object) -> None:
        object.__setattr__(self, "_example_input_array", example)

    # ---- logging ------------------------------------------------------------------------------
    def log(
        self,
        name: str,
        value: Tensor | float,
        prog_bar: bool = False,
        logger: bool = True,
        on_step: bool | None = None,
        on_epoch: bool | None = None,
        reduce_fx: str = "mean",
        sync_dist: bool = False,
        batch_size: int | None = None,
    ) -> None:
        """Record a scalar: per step and/or aggregated per epoch, shown in loggers and the bar."""
        trainer = self._trainer
        store = trainer.run_state.metrics.active if trainer is not None else None
        if store is None:
            return
        store.log(
            name, value, prog_bar, logger, on_step, on_epoch, reduce_fx, sync_dist, batch_size
        )

    def log_dict(self, metrics: Mapping[str, Tensor | float], **kwargs: Any) -> None:
        """``self.log`` each entry of ``metrics`` with the same options."""
        for name, value in metrics.items():
            self.log(name, value, **kwargs)

    def print(self, *args: Any, **kwargs: Any) -> None:
        """``print`` on global rank 0 only."""
        if self.global_rank == 0:
            print(*args, **kwargs)

    # ---- hyperparameters --------------------------------------------------------------------
    def save_hyperparameters(
        self,
        *names: str | dict[str, Any],
        ignore: str | list[str] | None = None,
        frame: FrameType | None = None,
        logger: bool = True,
    ) -> None:
        """Store the ``__init__`` arguments in ``self.hparams``, checkpoints and hparams.yaml
        (and the loggers, unless ``logger=False``)."""
        if frame is None:
            current = inspect.currentframe()
            frame = current.f_back if current else None
        init_args = collect_init_args(frame, self) if frame else {}
        self._hparams = AttributeDict(select_hparams(init_args, names, ignore))
        self._log_hyperparams = logger

    def freeze(self) -> None:
        """No gradients for any parameter, and evaluation mode."""
        for param in self.parameters():
            param.requires_grad = False
        self.eval()

    def unfreeze(self) -> None:
        """Gradients for every parameter again, and training mode."""
        for param in self.parameters():
            param.requires_grad = True
        self.train()

    @classmethod
    def load_from_checkpoint(
        cls,
        checkpoint_path: str,
        map_location: MAP_LOCATION = "cpu",
        hparams_file: str | None = None,
        strict: bool | None = None,
        **overrides: object,
    ):
        """Build the module from a checkpoint's hyperparameters (or ``hparams_file``), updated
        by ``overrides``, and load its weights (``strict``: every key must match)."""
        from trainkit.checkpoint.files import check_fits, load_checkpoint, require_state_dict

        path = checkpoint_path
        checkpoint = load_checkpoint(path, map_location=map_location)
        require_state_dict(checkpoint, path)
        saved = checkpoint.get("hyper_parameters", {})
        if hparams_file is not None:
            import yaml

            with open(hparams_file) as file:
                saved = yaml.safe_load(file) or {}
        model = cls(**{**saved, **overrides})
        strict = model.strict_loading if strict is None else strict
        if strict:
            check_fits(model, checkpoint["state_dict"], str(path))
        model.load_state_dict(checkpoint["state_dict"], strict=strict)
        model.on_load_checkpoint(checkpoint)
        return model

    # ---- optimization helpers -----------------------------------------------------------------
    def optimizers(self) -> Any:
        """The optimizer (or list of them) built from ``configure_optimizers``."""
        optimizers = self.trainer.optimizers
        return optimizers[0] if len(optimizers) == 1 else optimizers

    def lr_schedulers(self) -> Any:
        """The scheduler (or list of them), or None."""
        schedulers = [config.scheduler for config in self.trainer.lr_scheduler_configs]
        if not schedulers:
            return None
        return schedulers[0] if len(schedulers) == 1 else schedulers

    def manual_backward(self, loss: Tensor) -> None:
        """``loss.backward()`` through the precision plugin and strategy (manual optimization)."""
        self.trainer.run_state.stepper.backward(loss)

    def toggle_optimizer(self, optimizer: Optimizer) -> None:
        """Only ``optimizer``'s parameters get gradients until ``untoggle_optimizer`` (GANs)."""
        self._toggle.toggle(self.parameters(), optimizer)

    def untoggle_optimizer(self, optimizer: Optimizer) -> None:
        """Give back the ``requires_grad`` every parameter had before ``toggle_optimizer``."""
        self._toggle.restore()

    @contextmanager
    def toggled_optimizer(self, optimizer: Optimizer) -> Iterator[None]:
        """``toggle_optimizer`` for the block, ``untoggle_optimizer`` after it."""
        self.toggle_optimizer(optimizer)
        try:
            yield
        finally:
            self.untoggle_optimizer(optimizer)

    def clip_gradients(
        self,
        optimizer: Optimizer,
        gradient_clip_val: float | None = None,
        gradient_clip_algorithm: str | None = None,
    ) -> None:
        """Clip the gradients of ``optimizer``'s parameters by 'norm' (default) or 'value'."""
        clip_gradients(optimizer, gradient_clip_val, gradient_clip_algorithm)

    # ---- steps of automatic optimization (override to change them) ----------------------------
    def backward(self, loss: torch.Tensor, *args: Any, **kwargs: Any) -> None:
        """Backpropagate ``loss`` (already scaled under 16-mixed); override for, e.g.,
        ``retain_graph``."""
        loss.backward(*args, **kwargs)

    def optimizer_step(
        self,
        epoch: int,
        batch_idx: int,
        optimizer: Optimizer,
        optimizer_closure: Callable[[], Any] | None = None,
    ) -> None:
        """Step ``optimizer``; override for, e.g., learning-rate warm-up (keep the call
        ``optimizer.step(closure=optimizer_closure)``); its ``step`` goes through the precision
        plugin, all else is the optimizer's (Lightning's LightningOptimizer)."""
        optimizer.step(closure=optimizer_closure)

    def optimizer_zero_grad(self, epoch: int, batch_idx: int, optimizer: Optimizer) -> None:
        """Clear the gradients after a step; override to keep or zero them differently."""
        optimizer.zero_grad()

    def lr_scheduler_step(self, scheduler: Any, metric: float | None = None) -> None:
        """Step ``scheduler``; override for schedulers with another step signature (timm);
        ``scheduler`` is Any so that an override may name its own scheduler class."""
        if metric is None:
            scheduler.step()
        else:
            scheduler.step(metric)

    def configure_gradient_clipping(
        self,
        optimizer: Optimizer,
        gradient_clip_val: float | None = None,
        gradient_clip_algorithm: str | None = None,
    ) -> None:
        """Called before every optimizer step with the Trainer's clipping settings; override
        to clip differently (call ``self.clip_gradients``)."""
        self.clip_gradients(optimizer, gradient_clip_val, gradient_clip_algorithm)

    def all_gather(self, data: object, sync_grads: bool = False) -> Any:
        """``data`` (a tensor, number, or a dict/list of them) from every rank, stacked along a
        new first dimension (unchanged on one process); ``sync_grads`` keeps the gradient."""
        gather = self.trainer.strategy.all_gather
        if sync_grads and self.trainer.world_size > 1:
            from torch.distributed.nn.functional import all_gather as gather_with_grads

            def gather(tensor: Tensor) -> Tensor:
                return torch.stack(gather_with_grads(tensor.contiguous()))

        def each(value: object) -> Any:
            if isinstance(value, Mapping):
                return {key: each(item) for key, item in value.items()}
            if isinstance(value, list | tuple):
                return type(value)(each(item) for item in value)
            if isinstance(value, int | float | bool):
                value = torch.tensor(value, device=self.device)
            return gather(value) if isinstance(value, Tensor) else value

        return each(data)


def defines_training_step(module: TrainModule) -> bool:
    """Whether the module's class defines its own training_step."""
    step = getattr(type(module), "training_step", None)
    return callable(step) and step is not TrainModule.training_step


def defines_optimizers(module: TrainModule) -> bool:
    """Whether the module (its class, or the CLI's optimizer section) provides configure_optimizers."""
    configure = module.configure_optimizers
    return getattr(configure, "__func__", None) is not TrainModule.configure_optimizers


LightningModule = TrainModule  # Lightning's name, so ``import trainkit as pl`` code runs unchanged


def without_batch_idx(module: TrainModule, name: str, step: Callable[..., Any]) -> Callable:
    """``step`` as the loops call it, ``(batch, batch_idx, ...)``, for a module whose step
    method leaves ``batch_idx`` out (Lightning allows ``training_step(self, batch)``)."""
    params = inspect.signature(getattr(module, name)).parameters.values()
    if any(p.kind is p.VAR_POSITIONAL for p in params):
        return step
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    if len(positional) >= 2:
        return step
    return lambda batch, *_: step(batch)
