"""The parser of one ``trainkit`` subcommand (what ``trainkit fit`` parses options with)."""

from __future__ import annotations

from typing import Any

from trainkit.cli.optimizers import ConfiguredOptimizers, instantiate_class

__all__ = ["ConfiguredOptimizers", "build_parser", "instantiate", "instantiate_class"]


def build_parser(
    prog: str, model_class: type | None, datamodule_class: type | None, subcommand: str
) -> Any:
    """One subcommand's parser, as ``trainkit`` builds it: trainer, model, data, optimizer,
    lr_scheduler, seed_everything, ckpt_path (it parses ``--section.key`` options directly)."""
    from trainkit.cli.command import TrainkitCLI

    return TrainkitCLI.subcommand_parser(
        subcommand, prog, model_class=model_class, datamodule_class=datamodule_class
    )


def instantiate(parser: Any, config: Any) -> tuple[Any, Any, Any]:
    """Seed, then build model, data module and Trainer from a config ``build_parser``'s parser
    read, as ``trainkit`` does."""
    from trainkit.cli.command import TrainkitCLI

    cli = TrainkitCLI.built_from(parser, config, save_config_kwargs={"overwrite": True})
    return cli.model, cli.datamodule, cli.trainer
