"""``LightningArgumentParser``: jsonargparse's parser with Lightning's helpers for adding a
callback, an optimizer or a scheduler as its own config section."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from jsonargparse import ArgumentParser, class_from_function
from torch.optim import Optimizer

from trainkit.callbacks.base import Callback
from trainkit.cli.optimizers import LRSchedulerTypeTuple
from trainkit.datamodule import DataModule
from trainkit.errors import ConfigError
from trainkit.module import TrainModule
from trainkit.trainer.trainer import Trainer

SectionClasses = type | tuple[type, ...]

# --help's group titles for the sections trainkit adds (jsonargparse takes a class docstring's
# first line, or the repr of a tuple of classes)
SECTION_TITLES = {
    "trainer": "trainer: the Trainer's arguments (Lightning's names)",
    "model": "model: your TrainModule subclass, by class_path, with its init_args",
    "data": "data: your DataModule subclass, by class_path, with its init_args",
    "optimizer": "optimizer: a torch.optim class and its init_args (replaces the model's "
    "configure_optimizers)",
    "lr_scheduler": "lr_scheduler: a torch.optim.lr_scheduler class and its init_args (needs an "
    "optimizer section)",
}
# help of the arguments of the Trainer's stage methods that their docstrings do not describe
METHOD_ARGUMENT_HELP = {
    "ckpt_path": "The checkpoint to start from: 'last' (the run that trained furthest under "
    "default_root_dir; none there: start fresh), 'best', or a file path.",
    "weights_only": "Load the checkpoint with torch.load(weights_only=True) (only tensors and "
    "plain types); null: the Trainer's checkpoint_weights_only.",
}


class LightningArgumentParser(ArgumentParser):
    """A config parser (YAML files, ``--section.key`` options, omegaconf interpolation) that
    knows trainkit's classes: callbacks added as sections join the Trainer's callbacks."""

    def __init__(
        self,
        *args: Any,
        description: str = "trainkit command line",
        env_prefix: str = "PL",
        default_env: bool = False,
        **kwargs: Any,
    ) -> None:
        kwargs.setdefault("parser_mode", "omegaconf")  # ${section.key} and ${oc.env:VAR,default}
        kwargs.setdefault("exit_on_error", False)  # errors become one line (cli/failures.py)
        kwargs.setdefault("allow_abbrev", False)  # --trainer.max_epoch must not mean max_epochs
        super().__init__(
            *args, description=description, env_prefix=env_prefix, default_env=default_env, **kwargs
        )
        self.callback_keys: list[str] = []
        self.optimizer_keys: dict[str, tuple[SectionClasses, str]] = {}
        self.lr_scheduler_keys: dict[str, tuple[SectionClasses, str]] = {}

    def add_lightning_class_args(
        self,
        lightning_class: type | Callable[..., Any],
        nested_key: str,
        subclass_mode: bool = False,
        required: bool = True,
    ) -> list[str] | None:
        """Add a Trainer, module, data module or callback class's arguments under
        ``nested_key``; a callback built from them joins the Trainer's callbacks."""
        if callable(lightning_class) and not isinstance(lightning_class, type):
            lightning_class = class_from_function(lightning_class)
        kinds = (Trainer, TrainModule, DataModule, Callback)
        if not (isinstance(lightning_class, type) and issubclass(lightning_class, kinds)):
            raise ConfigError(
                f"add_lightning_class_args({nested_key!r})",
                lightning_class,
                "a Trainer, LightningModule, LightningDataModule or Callback class, or a "
                "function returning one",
                "pass the class itself",
            )
        if issubclass(lightning_class, Callback):
            self.callback_keys.append(nested_key)
        if subclass_mode:
            return self.add_subclass_arguments(
                lightning_class, nested_key, fail_untyped=False, required=required
            )
        return self.add_class_arguments(
            lightning_class,
            nested_key,
            fail_untyped=False,
            instantiate=not issubclass(lightning_class, Trainer),
            sub_configs=True,
        )

    def add_optimizer_args(
        self,
        optimizer_class: SectionClasses = (Optimizer,),
        nested_key: str = "optimizer",
        link_to: str = "AUTOMATIC",
    ) -> None:
        """An optimizer section: one class's arguments, or (a tuple) any subclass by
        class_path; ``link_to``: a model argument that receives it, else AUTOMATIC
        (it becomes the model's configure_optimizers)."""
        _check_classes(optimizer_class, (Optimizer,), nested_key, "an Optimizer subclass")
        self._add_section(optimizer_class, nested_key, "params")
        self.optimizer_keys[nested_key] = (optimizer_class, link_to)

    def add_lr_scheduler_args(
        self,
        lr_scheduler_class: SectionClasses = LRSchedulerTypeTuple,
        nested_key: str = "lr_scheduler",
        link_to: str = "AUTOMATIC",
    ) -> None:
        """A learning-rate scheduler section, like ``add_optimizer_args``."""
        _check_classes(
            lr_scheduler_class, LRSchedulerTypeTuple, nested_key, "an LRScheduler subclass"
        )
        self._add_section(lr_scheduler_class, nested_key, "optimizer")
        self.lr_scheduler_keys[nested_key] = (lr_scheduler_class, link_to)

    def add_method_arguments(self, *args: Any, **kwargs: Any) -> list[str]:
        """jsonargparse's, with help for the arguments the method's docstring leaves bare."""
        added = super().add_method_arguments(*args, **kwargs)
        for action in self._actions:
            if action.help is None and action.dest in METHOD_ARGUMENT_HELP:
                action.help = METHOD_ARGUMENT_HELP[action.dest]
        return added

    def format_help(self) -> str:
        """``--help``, with plain group titles: the section's name and what goes in it."""
        for key, group in (self.groups or {}).items():
            section = key == "trainer" or any(  # the section, not one class's own --KEY.help
                f"--{key}.help" in action.option_strings for action in self._actions
            )
            title = SECTION_TITLES.get(key) if section else None
            group.title = title or _plain_title(key, group.title)
        for action in self._actions:
            if action.dest == "trainer.dry_run":
                action.help = (
                    "The same as --dry_run, as the Trainer's argument (trainer: {dry_run: "
                    "true} in a config, Trainer(dry_run=True) in Python)."
                )
        return super().format_help()

    def _add_section(self, classes: SectionClasses, nested_key: str, first: str) -> None:
        options: dict[str, Any] = {"instantiate": False, "fail_untyped": False, "skip": {first}}
        if isinstance(classes, tuple):
            self.add_subclass_arguments(classes, nested_key, required=False, **options)
        else:
            self.add_class_arguments(classes, nested_key, sub_configs=True, **options)


def _check_classes(
    classes: SectionClasses, bases: tuple[type, ...], key: str, expected: str
) -> None:
    for cls in classes if isinstance(classes, tuple) else (classes,):
        if not (isinstance(cls, type) and issubclass(cls, bases)):
            raise ConfigError(f"{key} class", cls, expected, "pass the class itself")


def _plain_title(key: str, title: str | None) -> str:
    """A group title without RST markup (````x````) or a Python repr of classes."""
    import re

    if not title or "<class '" in title:
        return f"{key}:"
    text = re.sub(r"``([^`]*)``", r"\1", title).rstrip(";:, ")
    return text if text.startswith(f"{key}:") else f"{key}: {text}"
