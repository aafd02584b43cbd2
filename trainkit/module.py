"""TrainModule: the user's model, with Lightning's hook names and ``self.log``."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Self, TypeVar

import torch
from torch import Tensor, nn
from torch.optim import Optimizer
from torch.serialization import MAP_LOCATION

from trainkit.checkpoint.from_checkpoint import restricted_classmethod
from trainkit.common.properties import TypedProperty
from trainkit.gradients import ParameterToggle, clip_gradients
from trainkit.hparams import HyperparametersMixin
from trainkit.module_hooks import HooksMixin

T = TypeVar("T")


class FromTrainer(TypedProperty[T]):
    """A module's read-out of its Trainer's ``name``: ``default`` while no Trainer is attached."""

    def __init__(self, name: str, default: T, doc: str | None = None) -> None:
        def read(self: TrainModule) -> T:
            trainer = self._trainer
            return default if trainer is None else getattr(trainer, name)

        super().__init__(read, doc=doc)


class TrainModule(HooksMixin, HyperparametersMixin, nn.Module):
    """Subclass this: define training_step and configure_optimizers, the Trainer does the rest."""

    # ``batch`` stays Any in the steps and transfer hooks, as in Lightning: an override narrows it
    # (``batch: list[Tensor]``), which an ``object`` base makes an incompatible override (mypy)

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)
        self.automatic_optimization: bool = True
        self._trainer: Any = None
        self._example_input_array: Any = None
        self._toggle = ParameterToggle()
        self.strict_loading = True
        self.prepare_data_per_node = True  # False: prepare_data on global rank 0 only

    # ---- steps the user defines -------------------------------------------------------------
    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """The module's computation (define it; ``self(x)`` calls it)."""
        return super().forward(*args, **kwargs)

    def training_step(self, *args: Any, **kwargs: Any) -> Tensor | Mapping[str, Any] | None:
        """Compute and return the loss (or a dict with ``"loss"``) for one batch:
        ``training_step(self, batch, batch_idx)``."""
        raise NotImplementedError

    def validation_step(self, *args: Any, **kwargs: Any) -> Any:
        """Compute validation metrics for one batch (``batch, batch_idx`` and, with several
        loaders, ``dataloader_idx``); log them with ``self.log``."""

    def test_step(self, *args: Any, **kwargs: Any) -> Any:
        """Compute test metrics for one batch; log them with ``self.log``."""

    def predict_step(self, *args: Any, **kwargs: Any) -> Any:
        """Return the prediction for one batch (default: ``self(batch)``, of its first element
        when it is a list or tuple)."""
        batch = kwargs.get("batch", args[0] if args else None)
        if isinstance(batch, list | tuple):
            batch = batch[0]
        return self(batch)

    def configure_optimizers(self) -> Any:
        """Return an optimizer, a list of them, or a dict with ``optimizer`` and ``lr_scheduler``."""
        from trainkit.errors import MisconfigurationError, no_optimizer

        raise MisconfigurationError(no_optimizer(type(self).__name__))

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

    global_rank = FromTrainer("global_rank", 0)
    local_rank = FromTrainer("local_rank", 0)
    current_epoch = FromTrainer("current_epoch", 0)
    global_step = FromTrainer("global_step", 0)

    @property
    def on_gpu(self) -> bool:
        """Whether the module's parameters are on a CUDA device."""
        return self.device.type == "cuda"

    logger = FromTrainer[Any]("logger", None, "The Trainer's first logger (None: there is none).")

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
        logger: bool | None = None,
        on_step: bool | None = None,
        on_epoch: bool | None = None,
        reduce_fx: str | Callable[..., Any] = "mean",
        enable_graph: bool = False,
        sync_dist: bool = False,
        sync_dist_group: object = None,
        add_dataloader_idx: bool = True,
        batch_size: int | None = None,
        metric_attribute: str | None = None,
        rank_zero_only: bool = False,
    ) -> None:
        """Record a scalar: per step and/or aggregated per epoch, shown in loggers (unless
        ``logger=False``) and the bar. ``sync_dist``: reduced over every rank (``rank_zero_only``:
        logged by rank 0 alone, never synced); ``add_dataloader_idx=False``: no
        ``/dataloader_idx_N`` suffix with several loaders; ``enable_graph``: the step value keeps
        its graph. (``metric_attribute`` is not needed: a logged Metric is kept as the object.)"""
        trainer = self._trainer
        store = trainer.run_state.metrics.active if trainer is not None else None
        if store is None:
            return
        sync = sync_dist and not rank_zero_only
        options = (reduce_fx, sync, batch_size, enable_graph, add_dataloader_idx, sync_dist_group)
        store.log(name, value, prog_bar, logger is not False, on_step, on_epoch, *options)

    def log_dict(
        self,
        dictionary: Mapping[str, Tensor | float],
        prog_bar: bool = False,
        logger: bool | None = None,
        on_step: bool | None = None,
        on_epoch: bool | None = None,
        reduce_fx: str | Callable[..., Any] = "mean",
        enable_graph: bool = False,
        sync_dist: bool = False,
        sync_dist_group: object = None,
        add_dataloader_idx: bool = True,
        batch_size: int | None = None,
        rank_zero_only: bool = False,
    ) -> None:
        """``self.log`` each entry of ``dictionary`` (a MetricCollection too) with these options."""
        options = (prog_bar, logger, on_step, on_epoch, reduce_fx, enable_graph, sync_dist)
        more = (sync_dist_group, add_dataloader_idx, batch_size, None, rank_zero_only)
        for name, value in dictionary.items():
            self.log(name, value, *options, *more)

    def print(self, *args: object, **kwargs: Any) -> None:
        """``print`` on global rank 0 only."""
        if self.global_rank == 0:
            print(*args, **kwargs)

    # ---- hyperparameters (save_hyperparameters, hparams: hparams.py) ------------------------
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

    @restricted_classmethod
    def load_from_checkpoint(
        cls,
        checkpoint_path: str,
        map_location: MAP_LOCATION = None,
        hparams_file: str | None = None,
        strict: bool | None = None,
        weights_only: bool | None = None,
        **kwargs: Any,
    ) -> Self:
        """Build the module from a checkpoint's hyperparameters (or ``hparams_file``), updated
        by ``kwargs``, and load its weights (``strict``: every key must match; ``map_location``
        None: CPU; ``weights_only`` None: True)."""
        from trainkit.checkpoint.files import check_fits, require_state_dict
        from trainkit.checkpoint.from_checkpoint import build_from_checkpoint

        key = cls.CHECKPOINT_HYPER_PARAMS_KEY
        where = (checkpoint_path, key, map_location, hparams_file, weights_only, kwargs)
        model, checkpoint = build_from_checkpoint(cls, *where)
        require_state_dict(checkpoint, checkpoint_path)
        strict = model.strict_loading if strict is None else strict
        if strict:
            check_fits(model, checkpoint["state_dict"], str(checkpoint_path))
        model.load_state_dict(checkpoint["state_dict"], strict=strict)
        model.on_load_checkpoint(checkpoint)
        return model

    # ---- optimization helpers -----------------------------------------------------------------
    def optimizers(self, use_pl_optimizer: bool = True) -> Any:
        """The optimizer (or list of them) built from ``configure_optimizers``; under manual
        optimization (``use_pl_optimizer``) each wrapped so that its ``step`` goes through the
        precision and counts one global step."""
        optimizers = self.trainer.optimizers
        if use_pl_optimizer and not self.automatic_optimization:
            stepper = self.trainer.run_state.stepper
            if stepper is not None and stepper.manual_optimizers:
                optimizers = stepper.manual_optimizers
        return optimizers[0] if len(optimizers) == 1 else optimizers

    def lr_schedulers(self) -> Any:
        """The scheduler (or list of them), or None."""
        schedulers = [config.scheduler for config in self.trainer.lr_scheduler_configs]
        if not schedulers:
            return None
        return schedulers[0] if len(schedulers) == 1 else schedulers

    def manual_backward(self, loss: Tensor, *args: Any, **kwargs: Any) -> None:
        """``loss.backward(*args, **kwargs)`` through the precision plugin and strategy (manual
        optimization), e.g. ``retain_graph=True``."""
        self.trainer.run_state.stepper.backward(loss, *args, **kwargs)

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

    def lr_scheduler_step(self, scheduler: Any, metric: float | None) -> None:
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

    def all_gather(self, data: object, group: Any = None, sync_grads: bool = False) -> Any:
        """``data`` (a tensor, number, or a dict/list of them) from every rank (of ``group``,
        a process group), stacked along a new first dimension (unchanged on one process);
        ``sync_grads`` keeps the gradient."""
        from trainkit.distributed.comm import gather_nested, group_gather

        gather = self.trainer.strategy.all_gather
        if (sync_grads or group is not None) and self.trainer.world_size > 1:
            gather = group_gather(group, sync_grads)
        return gather_nested(data, gather, self.device)


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
