"""The jsonargparse parser behind the CLI, and turning a parsed config into objects."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import Any


def build_parser(
    prog: str, model_class: type | None, datamodule_class: type | None, subcommand: str
):
    """One subcommand's parser: trainer, model, data, optimizer, lr_scheduler, seed, ckpt_path."""
    import torch
    from jsonargparse import ActionConfigFile, ArgumentParser

    from trainkit.cli.subcommands import SUBCOMMANDS
    from trainkit.datamodule import DataModule
    from trainkit.module import TrainModule
    from trainkit.trainer.trainer import Trainer

    parser = ArgumentParser(
        prog=prog,
        description=SUBCOMMANDS[subcommand],
        parser_mode="omegaconf",
        exit_on_error=False,
        allow_abbrev=False,  # --trainer.max_epoch must not quietly mean max_epochs
    )
    parser.add_argument(
        "-c", "--config", action=ActionConfigFile, help="A YAML config; repeat to layer several."
    )
    parser.add_argument(
        "--seed_everything",
        type=bool | int,
        default=True,
        help="Seed for python/numpy/torch and workers: an int, true (pick one and record it) or false.",
    )
    parser.add_argument(
        "--ckpt_path",
        type=str | None,
        default=None,
        help="Checkpoint to resume (fit) or evaluate: 'last', 'best' or a path.",
    )
    parser.add_class_arguments(Trainer, "trainer", instantiate=True)
    if model_class is not None:
        parser.add_class_arguments(model_class, "model")
    else:
        parser.add_subclass_arguments(TrainModule, "model", required=True)
    if datamodule_class is not None:
        parser.add_class_arguments(datamodule_class, "data")
    else:
        parser.add_subclass_arguments(DataModule, "data", required=False)
    parser.add_subclass_arguments(
        torch.optim.Optimizer,
        "optimizer",
        instantiate=False,
        required=False,
        skip={"params"},
    )
    parser.add_subclass_arguments(
        torch.optim.lr_scheduler.LRScheduler,
        "lr_scheduler",
        instantiate=False,
        required=False,
        skip={"optimizer"},
    )
    return parser


def instantiate(parser: Any, config: Any) -> tuple[Any, Any, Any]:
    """Seed, then build model, datamodule and trainer from the parsed config."""
    from trainkit.seed import seed_everything

    seed = config.get("seed_everything")
    if seed is not False:
        config["seed_everything"] = seed_everything(None if seed is True else seed)
    objects = parser.instantiate(config)
    model, datamodule, trainer = objects["model"], objects.get("data"), objects["trainer"]
    trainer.cli_config = parser.dump(config, skip_unset=False)
    optimizer, scheduler = config.get("optimizer"), config.get("lr_scheduler")
    if optimizer is not None:
        model.configure_optimizers = ConfiguredOptimizers(
            model, _plain(optimizer), _plain(scheduler)
        )
    elif scheduler is not None:
        from trainkit.errors import ConfigError

        raise ConfigError(
            "lr_scheduler",
            scheduler.get("class_path"),
            "an optimizer section too",
            "add optimizer: {class_path: torch.optim.SGD, init_args: {lr: 0.1}}",
        )
    return model, datamodule, trainer


def _plain(namespace: Any) -> dict[str, Any] | None:
    if namespace is None:
        return None
    return namespace.as_dict() if hasattr(namespace, "as_dict") else dict(namespace)


def instantiate_class(first_arg: Any, spec: dict[str, Any]) -> Any:
    """Build ``spec['class_path'](first_arg, **spec['init_args'])``."""
    module_name, _, class_name = spec["class_path"].rpartition(".")
    cls = getattr(importlib.import_module(module_name), class_name)
    return cls(first_arg, **spec.get("init_args", {}))


class ConfiguredOptimizers:
    """``configure_optimizers`` built from the config's optimizer / lr_scheduler sections."""

    def __init__(
        self, module: Any, optimizer: dict[str, Any], scheduler: dict[str, Any] | None
    ) -> None:
        self.module = module
        self.optimizer = optimizer
        self.scheduler = scheduler

    def __call__(self) -> Any:

        optimizer = instantiate_class(self.module.parameters(), self.optimizer)
        if self.scheduler is None:
            return optimizer
        scheduler = instantiate_class(optimizer, self.scheduler)
        return {
            "optimizer": optimizer,
            "lr_scheduler": {"scheduler": scheduler, "monitor": "val_loss"},
        }


def check_ckpt_path(ckpt_path: str | None, root: str) -> None:
    """Fail early (exit 2) when a requested checkpoint cannot exist."""
    from trainkit.checkpoint.io import find_checkpoint

    if ckpt_path is None:
        return
    if ckpt_path in ("last", "best"):
        if find_checkpoint(root) is None:
            raise FileNotFoundError(
                f"ckpt_path {ckpt_path!r}: no checkpoint under {root!r}; expected a finished fit there; "
                "run fit first or pass a path"
            )
        return
    if not Path(ckpt_path).exists():
        raise FileNotFoundError(
            f"ckpt_path {ckpt_path!r} does not exist; expected 'last', 'best' or a file path"
        )
