"""Every hook call of a callback, a module and a data module, recorded under trainkit or under
Lightning: which hook of which object, the kind of each positional argument, the keyword names,
and what ``trainer.state`` and its flags said in each callback hook. ``record_runs(pl, root)``
runs the same small programs with ``pl`` = ``trainkit`` or ``lightning.pytorch``."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

# the module methods Lightning's Trainer calls beside the hooks of ModelHooks/DataHooks/CheckpointHooks
STEP_METHODS = {
    "training_step",
    "validation_step",
    "test_step",
    "predict_step",
    "configure_optimizers",
    "configure_callbacks",
    "configure_gradient_clipping",
    "optimizer_step",
    "optimizer_zero_grad",
    "backward",
    "lr_scheduler_step",
}
STATE_FLAGS = ("training", "validating", "testing", "predicting", "sanity_checking", "evaluating")


@dataclass(frozen=True)
class Call:
    """One hook call: ``owner`` ('callback', 'module' or 'datamodule'), the hook, the kind of
    each positional argument and the names of the keyword arguments."""

    owner: str
    hook: str
    args: tuple[str, ...]
    keywords: tuple[str, ...]

    @property
    def name(self) -> str:
        return f"{self.owner}.{self.hook}"

    def __str__(self) -> str:
        return f"{self.name}({', '.join([*self.args, *(k + '=' for k in self.keywords)])})"


@dataclass
class Recording:
    """The calls of one program, in order, and ``(hook, trainer state)`` for each callback hook."""

    calls: list[Call] = field(default_factory=list)
    states: list[tuple[str, tuple[Any, ...]]] = field(default_factory=list)

    def split(self) -> Recording:
        """What was recorded so far, as a recording of its own; this one goes on empty."""
        done = Recording(list(self.calls), list(self.states))
        self.calls.clear()
        self.states.clear()
        return done


def hook_names() -> dict[str, set[str]]:
    """The hooks Lightning's Trainer may call, per owner, as Lightning's classes name them."""
    import lightning.pytorch as pl
    from lightning.pytorch.core.hooks import CheckpointHooks, DataHooks, ModelHooks

    def functions(*classes: type) -> set[str]:
        return {
            name
            for cls in classes
            for name, value in vars(cls).items()
            if not name.startswith("_") and inspect.isfunction(value)
        }

    return {
        "callback": functions(pl.Callback),
        # configure_sharded_model: Lightning refuses a module overriding it beside configure_model
        "module": (functions(ModelHooks, DataHooks, CheckpointHooks) | STEP_METHODS)
        - {"configure_sharded_model"},
        "datamodule": functions(DataHooks, pl.LightningDataModule),
    }


def kind_of(pl: ModuleType) -> Callable[[object], str]:
    """What an argument is, in words both frameworks share ('trainer', 'Tensor', 'optimizer'...)."""
    own = (("trainer", pl.Trainer), ("module", pl.LightningModule))
    own += (("datamodule", pl.LightningDataModule),)
    plain = ((bool, "bool"), (int, "int"), (float, "float"), (str, "str"), (Mapping, "dict"))
    plain += (((list, tuple), "sequence"), (torch.device, "device"), (BaseException, "exception"))

    def kind(value: object) -> str:
        if value is None:
            return "None"
        for name, cls in own:
            if isinstance(value, cls):
                return name
        if isinstance(value, torch.Tensor):
            return "Tensor"
        for cls, name in plain:
            if isinstance(value, cls):
                return name
        schedulers = (
            torch.optim.lr_scheduler.LRScheduler,
            torch.optim.lr_scheduler.ReduceLROnPlateau,
        )
        if isinstance(value, schedulers):
            return "scheduler"
        optimizer = getattr(value, "optimizer", value)  # a wrapper that steps through precision
        if isinstance(optimizer, torch.optim.Optimizer):
            return "optimizer"
        return "callable" if callable(value) else type(value).__name__

    return kind


def state_of(trainer: Any) -> tuple[Any, ...]:
    """``trainer.state``'s fn, stage, status and finished, and the flags that are True."""
    state = trainer.state

    def text(value: object) -> object:
        return getattr(value, "value", value)

    flags = tuple(flag for flag in STATE_FLAGS if getattr(trainer, flag, None) is True)
    parts = (getattr(state, part, "missing") for part in ("fn", "stage", "status", "finished"))
    return (*(text(part) for part in parts), flags)


def recording(base: type, owner: str, names: Iterable[str], record: Recording, kind) -> type:
    """A subclass of ``base`` whose hooks named ``names`` (those ``base`` has) record each call,
    then run ``base``'s."""

    def make(name: str) -> Callable[..., Any]:
        def hook(self: Any, *args: Any, **kwargs: Any) -> Any:
            kinds = tuple(map(kind, args))
            record.calls.append(Call(owner, name, kinds, tuple(sorted(kwargs))))
            if kinds[:1] == ("trainer",):
                record.states.append((name, state_of(args[0])))
            return getattr(super(cls, self), name)(*args, **kwargs)

        return hook

    body = {name: make(name) for name in sorted(names) if hasattr(base, name)}
    cls = type(f"Recording{base.__name__}", (base,), body)
    return cls


def loader(n: int = 8, batch_size: int = 4, seed: int = 0) -> DataLoader:
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 2, generator=generator)
    return DataLoader(TensorDataset(x, x.sum(1, keepdim=True)), batch_size=batch_size)


def program_classes(pl: ModuleType, record: Recording) -> tuple[type, type, type]:
    """A tiny regression module, its data module and a callback, all recording into ``record``."""
    names = hook_names()
    kind = kind_of(pl)

    class Tiny(pl.LightningModule):
        def __init__(self, fail_at: int | None = None) -> None:
            super().__init__()
            self.layer = nn.Linear(2, 1)
            self.fail_at = fail_at

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.layer(x)

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            if batch_idx == self.fail_at:
                raise ValueError("the step fails on purpose")
            x, y = batch
            return F.mse_loss(self(x), y)

        def validation_step(self, batch: Any, batch_idx: int, dataloader_idx: int = 0) -> None:
            self.log("val_loss", F.mse_loss(self(batch[0]), batch[1]))

        def test_step(self, batch: Any, batch_idx: int, dataloader_idx: int = 0) -> None:
            self.log("test_loss", F.mse_loss(self(batch[0]), batch[1]))

        def predict_step(self, batch: Any, batch_idx: int, dataloader_idx: int = 0) -> Any:
            return self(batch[0])

        def configure_optimizers(self) -> Any:
            optimizer = torch.optim.SGD(self.parameters(), lr=0.1)
            return {
                "optimizer": optimizer,
                "lr_scheduler": torch.optim.lr_scheduler.StepLR(optimizer, 1),
            }

        def train_dataloader(self) -> DataLoader:
            return loader()

        def val_dataloader(self) -> DataLoader:
            return loader(seed=1)

        def test_dataloader(self) -> list[DataLoader]:
            return [loader(seed=2), loader(4, 2, seed=3)]

        def predict_dataloader(self) -> list[DataLoader]:
            return [loader(seed=2), loader(4, 2, seed=3)]

    class TinyData(pl.LightningDataModule):
        def train_dataloader(self) -> DataLoader:
            return loader()

        def val_dataloader(self) -> DataLoader:
            return loader(seed=1)

    module = recording(Tiny, "module", names["module"], record, kind)
    data = recording(TinyData, "datamodule", names["datamodule"], record, kind)
    callback = recording(pl.Callback, "callback", names["callback"], record, kind)
    return module, data, callback


def record_runs(pl: ModuleType, root: Path) -> dict[str, Recording]:
    """Fit, validate, test and predict (two loaders each), a fit with a data module, saving
    a checkpoint and resuming from it, and a fit whose step fails: each program's recording."""
    runs: dict[str, Recording] = {}

    def trainer(callback: type, **options: Any) -> Any:
        settings = dict(
            accelerator="cpu",
            devices=1,
            logger=False,
            enable_checkpointing=False,
            enable_progress_bar=False,
            enable_model_summary=False,
            default_root_dir=str(root),
            max_epochs=1,
            num_sanity_val_steps=1,
            limit_val_batches=2,
        )
        return pl.Trainer(**{**settings, **options}, callbacks=[callback()])

    record = Recording()
    Module, Data, Callback = program_classes(pl, record)
    trainer(Callback, max_epochs=2, gradient_clip_val=1.0).fit(Module())
    runs["fit"] = record.split()
    two = [loader(seed=2), loader(4, 2, seed=3)]
    trainer(Callback).validate(Module(), dataloaders=two)
    runs["validate"] = record.split()
    trainer(Callback).test(Module())
    runs["test"] = record.split()
    trainer(Callback).predict(Module())
    runs["predict"] = record.split()

    fitted = trainer(Callback)
    fitted.fit(Module(), datamodule=Data())
    runs["fit with a data module"] = record.split()
    path = str(root / f"{pl.__name__}.ckpt")
    fitted.save_checkpoint(path)
    runs["save_checkpoint"] = record.split()
    trainer(Callback, max_epochs=2).fit(Module(), datamodule=Data(), ckpt_path=path)
    runs["resume from the checkpoint"] = record.split()
    with pytest.raises(ValueError, match="on purpose"):
        trainer(Callback).fit(Module(fail_at=1), datamodule=Data())
    runs["a failing step"] = record.split()
    return runs
