"""LightningCLI's parsing half (``CLIParserSetup``, the base of ``lightning.LightningCLI``): the
sections it adds to a ``LightningArgumentParser`` (trainer, model, data, optimizer, lr_scheduler,
seed_everything), the requested subcommand's parser, parsing, and the hooks a subclass overrides."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from trainkit.cli.argv import find_subcommand
from trainkit.cli.method_arguments import MethodArguments
from trainkit.cli.save_config import SaveConfigCallback
from trainkit.cli.subcommands import SUBCOMMANDS

if TYPE_CHECKING:
    from jsonargparse import Namespace

    from trainkit.cli.argument_parser import LightningArgumentParser

    # what LightningCLI parses: argv-like strings, or a config as a dict or a Namespace
    # (None: sys.argv)
    ParsedArgs = list[str] | dict[str, Any] | Namespace | None


def program_name() -> str:
    """How the user started us (``main.py``), or ``trainkit`` for the console script."""
    name = Path(sys.argv[0]).name if sys.argv and sys.argv[0] else ""
    return "trainkit" if name in ("__main__.py", "-c", "") else name


@dataclass(frozen=True)
class CLIOptions:
    """What a ``LightningCLI`` is built with: its constructor's arguments but ``args`` and
    ``run`` (described there)."""

    model_class: type | Callable[..., Any] | None = None
    datamodule_class: type | Callable[..., Any] | None = None
    save_config_callback: type[SaveConfigCallback] | None = SaveConfigCallback
    save_config_kwargs: dict[str, Any] | None = None
    trainer_class: type | Callable[..., Any] | None = None
    trainer_defaults: dict[str, Any] | None = None
    seed_everything_default: bool | int = True
    parser_kwargs: dict[str, Any] | None = None
    parser_class: type | None = None
    subclass_mode_model: bool = False
    subclass_mode_data: bool = False
    auto_configure_optimizers: bool = True
    load_from_checkpoint_support: bool = True


class CLIParserSetup:
    """The parser-building half of ``LightningCLI`` (Lightning's method names and hooks)."""

    def configure_options(self, options: CLIOptions) -> None:
        self.save_config_callback = options.save_config_callback
        self.save_config_kwargs = options.save_config_kwargs or {}
        self.trainer_class = options.trainer_class
        self.trainer_defaults = options.trainer_defaults or {}
        self.seed_everything_default = options.seed_everything_default
        self.parser_kwargs = options.parser_kwargs or {}
        self.parser_class = options.parser_class
        self.auto_configure_optimizers = options.auto_configure_optimizers
        self.load_from_checkpoint_support = options.load_from_checkpoint_support
        self.model_class = options.model_class
        self.subclass_mode_model = options.model_class is None or options.subclass_mode_model
        self.datamodule_class = options.datamodule_class
        self.subclass_mode_data = options.datamodule_class is None or options.subclass_mode_data
        self.prog = program_name()
        self.result: Any = None
        self.subcommand: str | None = None  # the subcommand being run (None: run=False)

    @classmethod
    def subcommand_parser(
        cls, subcommand: str, prog: str, **options: Any
    ) -> LightningArgumentParser:
        """The parser this CLI builds for ``subcommand`` (nothing is parsed or built)."""
        cli = cls.__new__(cls)
        cli.configure_options(CLIOptions(**options))
        cli.subcommand, cli.trainer_class = subcommand, cli.trainer_class or trainkit_trainer()
        cli.setup_parser(True, {}, {subcommand: {"prog": prog}})
        return cli.subcommand_parsers[subcommand]

    def _requested_subcommand(
        self, argv: list[str] | None, args: ParsedArgs
    ) -> tuple[str, list[str] | None]:
        """The subcommand asked for, and the options after it (None for a dict of args)."""
        if argv is not None:
            position = find_subcommand(argv, self.prog, tuple(self.subcommands()))
            return argv[position], argv[position + 1 :]
        given = (  # argv is None: a config as a Namespace or a dict
            cast("Namespace", args).as_dict()
            if hasattr(args, "as_dict")
            else dict(cast("dict[str, Any]", args))
        )
        named = given.get("subcommand") or next((k for k in given if k in self.subcommands()), None)
        return named or "fit", None

    def _setup_parser_kwargs(self, parser_kwargs: dict[str, Any]) -> tuple[dict, dict]:
        names = self.subcommands()
        main_kwargs = {k: v for k, v in parser_kwargs.items() if k not in names}
        subparser_kwargs = {k: dict(v) for k, v in parser_kwargs.items() if k in names}
        return main_kwargs, subparser_kwargs

    def init_parser(self, **kwargs: Any) -> LightningArgumentParser:
        """A new parser with ``-c/--config``."""
        from jsonargparse import ActionConfigFile

        from trainkit import __version__
        from trainkit.cli.argument_parser import LightningArgumentParser

        kwargs.setdefault("dump_header", [f"trainkit=={__version__}"])
        parser = (self.parser_class or LightningArgumentParser)(**kwargs)
        parser.add_argument(
            "-c",
            "--config",
            action=ActionConfigFile,
            help="A YAML config; repeat to layer several.",
        )
        return parser

    def setup_parser(
        self, add_subcommands: bool, main_kwargs: dict[str, Any], subparser_kwargs: dict[str, Any]
    ) -> None:
        """The main parser: with the requested subcommand's parser, or (run=False) the
        arguments themselves."""
        main_kwargs.setdefault("prog", self.prog)
        self.parser = self.init_parser(**main_kwargs)
        self.subcommand_parsers: dict[str, LightningArgumentParser] = {}
        # another subcommand's arguments (and their defaults) are found when asked for
        self.subcommand_method_arguments = MethodArguments(self.subcommands(), self._unparsed)
        self.unparsed_defaults: dict[str, Namespace] = {}
        if add_subcommands:
            self._add_subcommands(self.parser, **subparser_kwargs)
        else:
            self._add_arguments(self.parser)

    def add_default_arguments_to_parser(self, parser: LightningArgumentParser) -> None:
        """Add ``--seed_everything``."""
        parser.add_argument(
            "--seed_everything",
            type=bool | int,
            default=self.seed_everything_default,
            help="Seed for python/numpy/torch and workers: an int, true (pick one and record "
            "it) or false.",
        )

    def add_core_arguments_to_parser(self, parser: LightningArgumentParser) -> None:
        """Add the trainer, model and data sections."""
        from trainkit.callbacks import import_all as load_callback_classes
        from trainkit.datamodule import DataModule
        from trainkit.module import TrainModule

        load_callback_classes()  # configs may name a callback by its class name alone
        parser.add_lightning_class_args(self.trainer_class or trainkit_trainer(), "trainer")
        defaults = {f"trainer.{k}": v for k, v in self.trainer_defaults.items() if k != "callbacks"}
        if defaults:
            parser.set_defaults(defaults)
        model = self.model_class or TrainModule
        parser.add_lightning_class_args(model, "model", subclass_mode=self.subclass_mode_model)
        parser.add_lightning_class_args(
            self.datamodule_class or DataModule,
            "data",
            subclass_mode=self.subclass_mode_data,
            required=self.datamodule_class is not None,
        )

    def _add_arguments(self, parser: LightningArgumentParser) -> None:
        from torch.optim import Optimizer

        from trainkit.cli.optimizers import LRSchedulerTypeTuple

        self.add_default_arguments_to_parser(parser)
        self.add_core_arguments_to_parser(parser)
        self.add_arguments_to_parser(parser)
        if self.auto_configure_optimizers:
            if not parser.optimizer_keys:
                parser.add_optimizer_args((Optimizer,))
            if not parser.lr_scheduler_keys:
                parser.add_lr_scheduler_args(LRSchedulerTypeTuple)
        self.link_optimizers_and_lr_schedulers(parser)

    def add_arguments_to_parser(self, parser: LightningArgumentParser) -> None:
        """Override to add arguments, sections (``parser.add_lightning_class_args``) or links
        (``parser.link_arguments``)."""

    @staticmethod
    def subcommands() -> dict[str, set[str]]:
        """The subcommands and the Trainer method arguments the CLI fills itself."""
        return {
            "fit": {"model", "train_dataloaders", "val_dataloaders", "datamodule"},
            "validate": {"model", "dataloaders", "datamodule"},
            "test": {"model", "dataloaders", "datamodule"},
            "predict": {"model", "dataloaders", "datamodule"},
        }

    def _add_subcommands(self, parser: LightningArgumentParser, **kwargs: dict[str, Any]) -> None:
        """Register the requested subcommand (the others are never parsed in this process)."""
        trainer_class = self._trainer_class()
        name = self.subcommand
        if name is None:  # run=False: nothing to run, no subcommand to register
            return
        subcommands = parser.add_subcommands()
        options = dict(kwargs.get(name, {}))
        options.setdefault("description", SUBCOMMANDS.get(name, ""))
        subparser = self._prepare_subcommand_parser(trainer_class, name, **options)
        self.subcommand_parsers[name] = subparser
        subcommands.add_subcommand(name, subparser, help=options["description"])

    @property
    def _subcommand_method_arguments(self) -> MethodArguments:
        """Lightning's name of ``subcommand_method_arguments`` (read by some programs)."""
        return self.subcommand_method_arguments

    def _unparsed(self, subcommand: str) -> list[str]:
        """The Trainer method arguments of a subcommand not parsed in this process, from a
        parser of only those; their defaults go to ``unparsed_defaults``."""
        from trainkit.cli.argument_parser import LightningArgumentParser

        parser = LightningArgumentParser()
        skip: set[str | int] = set(self.subcommands()[subcommand])
        added = parser.add_method_arguments(self._trainer_class(), subcommand, skip=skip)
        self.unparsed_defaults[subcommand] = parser.get_defaults()
        return added

    def _trainer_class(self) -> type:
        """The Trainer class the subcommands call (a function: made a class for parsing)."""
        from jsonargparse import class_from_function

        trainer_class = self.trainer_class or trainkit_trainer()
        if not isinstance(trainer_class, type):
            trainer_class = class_from_function(trainer_class)
        return trainer_class

    def _prepare_subcommand_parser(
        self, klass: type, subcommand: str, **kwargs: Any
    ) -> LightningArgumentParser:
        from trainkit.cli.run_options import add_run_options

        parser = self.init_parser(**kwargs)
        self._add_arguments(parser)
        add_run_options(parser, subcommand)
        skip: set[str | int] = set(self.subcommands()[subcommand])
        added = parser.add_method_arguments(klass, subcommand, skip=skip)
        self.subcommand_method_arguments[subcommand] = added
        return parser

    @staticmethod
    def link_optimizers_and_lr_schedulers(parser: LightningArgumentParser) -> None:
        """Link optimizer/scheduler sections that name a ``link_to`` target."""
        from trainkit.cli.optimizers import with_class_path

        sections = {**parser.optimizer_keys, **parser.lr_scheduler_keys}
        for key, (classes, link_to) in sections.items():
            if link_to == "AUTOMATIC":
                continue
            if isinstance(classes, tuple):
                parser.link_arguments(key, link_to)
            else:
                parser.link_arguments(
                    key, link_to, compute_fn=lambda init, cls=classes: with_class_path(cls, init)
                )

    def parse_arguments(self, parser: LightningArgumentParser, args: ParsedArgs) -> None:
        """Parse ``args`` (a list of strings or a dict) into ``self.config``."""
        if isinstance(args, dict) or hasattr(args, "as_dict"):
            self.config = parser.parse_object(cast("Namespace | dict[str, Any]", args))
        else:
            self.config = parser.parse_args(cast("list[str] | None", args))

    def _known_parser(self) -> LightningArgumentParser | None:
        """The parser whose options an unknown one is compared with (for suggestions)."""
        parsers = getattr(self, "subcommand_parsers", {})
        return parsers.get(self.subcommand) or getattr(self, "parser", None)

    def _parser(self, subcommand: str | None) -> LightningArgumentParser:
        return self.parser if subcommand is None else self.subcommand_parsers[subcommand]


def trainkit_trainer() -> type:
    from trainkit.trainer.trainer import Trainer

    return Trainer
