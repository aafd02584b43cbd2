"""``LightningCLI``: Lightning's configurable command line, on trainkit's Trainer.

``MyCLI(Model, Data)`` reads ``fit|validate|test|predict -c config.yaml --section.key V``,
builds model, data module and Trainer, and runs the subcommand; ``run=False`` only builds them.
Subclasses customise it through Lightning's hooks (``add_arguments_to_parser``,
``before_instantiate_classes``, ``before_fit``/``after_fit``, ...). Only the requested
subcommand's parser is built, and bad input ends as one line (exit 2) before any rank starts.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from trainkit.cli.argv import print_help_with_classes, typed_device_options, wants_help
from trainkit.cli.failures import dry_run_errors, one_line_parse_errors, one_line_run_errors
from trainkit.cli.import_policy import apply_import_policy
from trainkit.cli.input_limits import check_config_inputs
from trainkit.cli.lightning_config import write_logger_save_dirs
from trainkit.cli.lightning_parsing import CLIOptions, CLIParserSetup, trainkit_trainer
from trainkit.cli.run_options import DRY_RUN
from trainkit.cli.save_config import SaveConfigCallback
from trainkit.cycle_collector import rare_collections

if TYPE_CHECKING:
    from jsonargparse import Namespace
    from torch.optim import Optimizer

    from trainkit.cli.argument_parser import LightningArgumentParser
    from trainkit.cli.optimizers import LRSchedulerTypeUnion
    from trainkit.module import TrainModule

ArgsType = list[str] | dict[str, Any] | None


class LightningCLI(CLIParserSetup):
    """Parse a config, build model, data module and Trainer from it, and run a subcommand."""

    def __init__(
        self,
        model_class: type | Callable[..., Any] | None = None,
        datamodule_class: type | Callable[..., Any] | None = None,
        save_config_callback: type[SaveConfigCallback] | None = SaveConfigCallback,
        save_config_kwargs: dict[str, Any] | None = None,
        trainer_class: type | Callable[..., Any] | None = None,
        trainer_defaults: dict[str, Any] | None = None,
        seed_everything_default: bool | int = True,
        parser_kwargs: dict[str, Any] | None = None,
        parser_class: type | None = None,
        subclass_mode_model: bool = False,
        subclass_mode_data: bool = False,
        args: ArgsType = None,
        run: bool = True,
        auto_configure_optimizers: bool = True,
        load_from_checkpoint_support: bool = True,
    ) -> None:
        """Args:
        model_class: The LightningModule (or a function returning one); None: any, by class_path.
        datamodule_class: The LightningDataModule (or a function); None: any, by class_path.
        save_config_callback: Writes the config into the log folder; None: no file.
        save_config_kwargs: Its arguments, e.g. {'overwrite': True}.
        trainer_class: The Trainer class (or a function returning one); None: trainkit.Trainer.
        trainer_defaults: Trainer argument defaults; its 'callbacks' are always added.
        seed_everything_default: The seed: an int, True (pick one, record it) or False.
        parser_kwargs: Parser arguments, e.g. {'default_config_files': [...]}, or per
            subcommand {'fit': {...}}.
        parser_class: The parser class (a LightningArgumentParser subclass).
        subclass_mode_model: Take any subclass of model_class, by class_path.
        subclass_mode_data: Take any subclass of datamodule_class, by class_path.
        args: The arguments (a list like sys.argv[1:], or a dict); None: sys.argv[1:].
        run: Run the subcommand; False: build the objects only (no subcommand in args).
        auto_configure_optimizers: Add optimizer/lr_scheduler sections that become the
            model's configure_optimizers.
        load_from_checkpoint_support: Accepted for Lightning's signature; hyperparameters are
            what the classes' __init__ receives.
        """
        with rare_collections():  # start-up: torch and the classes import, the objects build
            self.configure_options(
                CLIOptions(
                    model_class=model_class,
                    datamodule_class=datamodule_class,
                    save_config_callback=save_config_callback,
                    save_config_kwargs=save_config_kwargs,
                    trainer_class=trainer_class,
                    trainer_defaults=trainer_defaults,
                    seed_everything_default=seed_everything_default,
                    parser_kwargs=parser_kwargs,
                    parser_class=parser_class,
                    subclass_mode_model=subclass_mode_model,
                    subclass_mode_data=subclass_mode_data,
                    auto_configure_optimizers=auto_configure_optimizers,
                    load_from_checkpoint_support=load_from_checkpoint_support,
                )
            )
            argv = (
                None
                if isinstance(args, dict) or hasattr(args, "as_dict")
                else list(sys.argv[1:] if args is None else args)
            )
            self.subcommand, after = self._requested_subcommand(argv, args) if run else (None, argv)
            self.trainer_class = self.trainer_class or trainkit_trainer()  # after a cheap --help
            self.help_hint = f"see {' '.join(filter(None, (self.prog, self.subcommand)))} --help"
            main_kwargs, subparser_kwargs = self._setup_parser_kwargs(self.parser_kwargs)
            one_line = functools.partial(
                one_line_parse_errors, self.prog, argv or [], self.help_hint, self._known_parser
            )
            with one_line():
                apply_import_policy()  # what a class_path may import
                if argv:  # sizes, depth, alias and interpolation expansion, before any YAML parser
                    check_config_inputs(argv)
                self.setup_parser(run, main_kwargs, subparser_kwargs)
                if after is not None and wants_help(after):
                    print_help_with_classes(self._parser(self.subcommand), after)
                self.parse_arguments(self.parser, typed_device_options(argv) if argv else args)
            self.subcommand = self.config["subcommand"] if run else None
            with one_line():
                self.set_seed()
            self.before_instantiate_classes()
            with one_line():
                self.instantiate_classes()
            self.after_instantiate_classes()
        if self.subcommand is not None:
            self._run_subcommand(self.subcommand)

    @classmethod
    def built_from(
        cls, parser: LightningArgumentParser, config: Namespace, **options: Any
    ) -> LightningCLI:
        """A CLI whose objects are built from ``config``, parsed by one subcommand's parser
        (``subcommand_parser``); nothing runs."""
        cli = cls.__new__(cls)
        cli.configure_options(CLIOptions(**options))
        cli.trainer_class = cli.trainer_class or trainkit_trainer()
        cli.subcommand, cli.parser, cli.config, cli.subcommand_parsers = None, parser, config, {}
        cli.set_seed()
        cli.instantiate_classes()
        return cli

    # objects --------------------------------------------------------------------------------

    def before_instantiate_classes(self) -> None:
        """Override to run code before the classes are built."""

    def instantiate_classes(self) -> None:
        """Build model, data module and Trainer (``self.model``, ``self.datamodule``,
        ``self.trainer``; everything built: ``self.config_init``)."""
        self.config_init = self.parser.instantiate(self.config)
        self.datamodule = self._get(self.config_init, "data")
        self.model = self._get(self.config_init, "model")
        self._add_configure_optimizers_method_to_model(self.subcommand)
        self.trainer = self.instantiate_trainer()

    def after_instantiate_classes(self) -> None:
        """Override to run code after the classes are built."""

    def instantiate_trainer(self, **kwargs: object) -> Any:
        """Build the Trainer from the trainer section (``kwargs`` win), with the callbacks of
        sections added by ``add_lightning_class_args``."""
        parser = self._parser(self.subcommand)
        extra = [self._get(self.config_init, key) for key in parser.callback_keys]
        section = self._get(self.config_init, "trainer", default={})
        config = {**(vars(section) if hasattr(section, "as_dict") else section), **kwargs}
        if self._get(self.config_init, DRY_RUN):  # --dry_run: the Trainer's dry_run
            config["dry_run"] = True
        return self._instantiate_trainer(config, extra)

    def _instantiate_trainer(self, config: dict[str, Any], callbacks: list[Any]) -> Any:
        given = config.get("callbacks")
        given = [] if given is None else list(given) if isinstance(given, list | tuple) else [given]
        persistent = self.trainer_defaults.get("callbacks", [])
        given += [*callbacks, *(persistent if isinstance(persistent, list) else [persistent])]
        parser = self._parser(self.subcommand)
        section = self.config.get(str(self.subcommand), self.config)
        if self.save_config_callback and not (config.get("fast_dev_run") or config.get("dry_run")):
            given.append(self.save_config_callback(parser, section, **self.save_config_kwargs))
        config["callbacks"] = given
        trainer = self.trainer_class(**config)
        if hasattr(trainer, "cli_config"):  # checkpoints record the config that made them
            write_logger_save_dirs(section, trainer.default_root_dir)  # as config.yaml has it
            trainer.cli_config = parser.dump(section, skip_unset=False)
        return trainer

    @staticmethod
    def configure_optimizers(
        lightning_module: TrainModule,
        optimizer: Optimizer,
        lr_scheduler: LRSchedulerTypeUnion | None = None,
    ) -> Any:
        """Override to change what the optimizer/lr_scheduler sections return as the model's
        ``configure_optimizers``."""
        from trainkit.cli.optimizers import default_configure_optimizers

        return default_configure_optimizers(lightning_module, optimizer, lr_scheduler)

    def _add_configure_optimizers_method_to_model(self, subcommand: str | None) -> None:
        """The optimizer section (one, linked AUTOMATIC) becomes the model's
        ``configure_optimizers``; without one the model's own method stays."""
        if not self.auto_configure_optimizers:
            return
        from trainkit.cli.optimizers import ConfiguredOptimizers, plain
        from trainkit.errors import ConfigError

        parser = self._parser(subcommand)
        optimizers = _automatic(parser.optimizer_keys)
        schedulers = _automatic(parser.lr_scheduler_keys)
        if len(optimizers) > 1 or len(schedulers) > 1:
            raise ConfigError(
                "automatic optimizer/lr_scheduler sections",
                optimizers + schedulers,
                "at most one of each with link_to='AUTOMATIC'",
                "link the others to model arguments (link_to=...) and write configure_optimizers",
            )
        optimizer_init = plain(self._section_init(parser.optimizer_keys, optimizers))
        scheduler_init = plain(self._section_init(parser.lr_scheduler_keys, schedulers))
        if not optimizer_init:
            if scheduler_init:
                raise ConfigError(
                    "lr_scheduler",
                    scheduler_init.get("class_path"),
                    "an optimizer section too",
                    "add optimizer: {class_path: torch.optim.SGD, init_args: {lr: 0.1}}",
                )
            return
        self.model.configure_optimizers = ConfiguredOptimizers(
            self.model, optimizer_init, scheduler_init, self.configure_optimizers
        )

    def _section_init(self, registry: dict[str, tuple[Any, str]], keys: list[str]) -> Any:
        """The first automatic section's class_path + init_args, None when not configured."""
        from trainkit.cli.optimizers import with_class_path

        if not keys:
            return None
        classes = registry[keys[0]][0]
        init = self._get(self.config_init, keys[0])
        return init if isinstance(classes, tuple) else with_class_path(classes, init)

    def _get(self, config: Namespace, key: str, default: object = None) -> Any:
        """A value of the subcommand's config (or of the whole config when run=False)."""
        return config.get(str(self.subcommand), config).get(key, default)

    # running --------------------------------------------------------------------------------

    def _run_subcommand(self, subcommand: str) -> None:
        """``before_<subcommand>``, the Trainer method (or a method of this name here), then
        ``after_<subcommand>``."""
        from trainkit.cli.checks import check_checkpoint, say_untrained
        from trainkit.cli.run_options import apply_run_options

        config = self._subcommand_config(subcommand)
        apply_run_options(config)
        before = getattr(self, f"before_{subcommand}", None)
        if callable(before):
            before()
        method = getattr(self, subcommand, getattr(self.trainer, subcommand))
        kwargs = self._prepare_subcommand_kwargs(subcommand)
        with one_line_run_errors(self.prog, also=(FileNotFoundError,)):
            check_checkpoint(
                self.trainer, self.model, subcommand, kwargs.get("ckpt_path"), self.datamodule
            )
        dry_run = bool(getattr(self.trainer, "dry_run", False))
        with one_line_run_errors(self.prog), dry_run_errors(self.prog, dry_run):
            self.result = method(**kwargs)
        say_untrained(self.trainer, subcommand, kwargs.get("ckpt_path"))
        after = getattr(self, f"after_{subcommand}", None)
        if callable(after):
            after()

    def _subcommand_config(self, subcommand: str) -> Any:
        """The parsed config of ``subcommand``, or the defaults of its method arguments for
        another one a subclass runs (``self._run_subcommand("test")`` in ``after_fit``)."""
        if subcommand in self.config_init:
            return self.config_init[subcommand]
        names = self.subcommand_method_arguments[subcommand]  # finds its defaults
        return {k: v for k, v in self.unparsed_defaults[subcommand].items() if k in names}

    def _prepare_subcommand_kwargs(self, subcommand: str) -> dict[str, Any]:
        names = self.subcommand_method_arguments[subcommand]
        config = self._subcommand_config(subcommand)
        kwargs = {k: v for k, v in config.items() if k in names}
        kwargs["model"] = self.model
        if self.datamodule is not None:
            kwargs["datamodule"] = self.datamodule
        return kwargs

    def set_seed(self) -> None:
        """Seed everything before the classes are built; the seed used goes into the config."""
        seed = self._get(self.config, "seed_everything")
        if seed is False:
            return
        from trainkit.seed import seed_everything

        seed = seed_everything(None if seed is True else seed, workers=True)
        self.config.get(str(self.subcommand), self.config)["seed_everything"] = seed


def _automatic(registry: dict[str, tuple[Any, str]]) -> list[str]:
    return [key for key, (_, link_to) in registry.items() if link_to == "AUTOMATIC"]
