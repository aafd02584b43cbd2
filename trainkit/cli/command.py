"""The ``trainkit`` command: ``trainkit fit|validate|test|predict -c config.yaml``.

``trainkit --help`` is answered without importing torch; a subcommand builds only its own parser.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import sys
from pathlib import Path
from typing import Any

from trainkit.cli.subcommands import SUBCOMMANDS


def main(argv: list[str] | None = None) -> None:
    """Console entry point; exits 75 (EX_TEMPFAIL) when a stop signal preempted fit."""
    from trainkit.distributed.signals import PREEMPTED_EXIT_CODE

    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())  # the user's own package next to their config, as python -m
    from trainkit.cli.quiet_warnings import show_each_warning_once

    show_each_warning_once()
    cli = TrainkitCLI(args=argv)
    code = PREEMPTED_EXIT_CODE if getattr(cli.trainer, "preempted", None) else 0
    finish_rank(code)
    if code:
        raise SystemExit(code)


def finish_rank(code: int = 0) -> None:
    """After a run in a rank: sync, destroy the process group, and leave without interpreter
    finalization (where gloo threads still holding tensors can abort the process)."""
    torch = sys.modules.get("torch")
    if (
        torch is None
        or not torch.distributed.is_available()
        or not torch.distributed.is_initialized()
    ):
        return
    from trainkit.distributed.rank_board import FINISHING, RankBoard

    RankBoard().mark(FINISHING)
    torch.distributed.barrier()
    torch.distributed.destroy_process_group()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def fail(message: str, prog: str = "trainkit") -> None:
    """Bad input: one line on stderr, exit code 2, no traceback."""
    print(f"{prog}: error: {message}", file=sys.stderr, flush=True)
    raise SystemExit(2)


def top_help(prog: str) -> str:
    example = "configs/autoencoder.yaml" if prog == "trainkit" else "config.yaml"
    lines = [
        f"usage: {prog} [-h] {{{','.join(SUBCOMMANDS)}}} [-c CONFIG] [--section.key VALUE ...]",
        "",
        "Config-driven training for PyTorch: one device to many, same config.",
        "",
        "subcommands:",
        *(f"  {name:<10} {text}" for name, text in SUBCOMMANDS.items()),
        "",
        "config sections: model, data, trainer, optimizer, lr_scheduler, seed_everything, ckpt_path",
        f"every option of a subcommand: {prog} fit --help",
        f"one model class:              {prog} fit --model.help my_package.MyModel",
        f"example:                      {prog} fit -c {example} --trainer.devices 2",
    ]
    return "\n".join(lines)


def _launched_rank() -> bool:
    """A rank started by trainkit's launcher, whose parent already checked the input."""
    from trainkit.distributed.signals import ERROR_FILE_ENV

    return bool(os.environ.get(ERROR_FILE_ENV))


def _config_error_inside(error: BaseException) -> BaseException | None:
    """The ConfigError a model or data __init__ raised, from the errors wrapped around it."""
    from trainkit.cli.errors import exception_chain
    from trainkit.errors import ConfigError

    return next((e for e in exception_chain(error) if isinstance(e, ConfigError)), None)


DEVICE_KEYS = ("trainer.devices", "trainer.gpus")


def typed_device_options(args: list[str]) -> list[str]:
    """``--trainer.devices V`` (and ``gpus``) read as YAML, like a config file: ``2`` is a
    count, ``'"0"'`` or ``0,`` an id string, ``[0, 1]`` a list. The parser keeps a config file's
    ``"0"`` a string, so a bare ``2`` here would stay the string ``"2"`` (GPU id 2); passing the
    value as ``--trainer {devices: 2}`` keeps its YAML type and its place among the options."""
    import json

    import yaml

    typed: list[str] = []
    rest = iter(args)
    for arg in rest:
        flag, equals, inline = arg.partition("=")
        key = flag.removeprefix("--")
        raw = inline if equals else next(rest, None) if key in DEVICE_KEYS else None
        if key not in DEVICE_KEYS or raw is None:
            typed.append(arg)
            continue
        try:
            value = yaml.safe_load(raw)
        except yaml.YAMLError:
            value = raw
        if not isinstance(value, int | str | list) or isinstance(value, bool):
            value = raw  # let the parser reject it with its usual message
        section, _, name = key.partition(".")
        typed += [f"--{section}", json.dumps({name: value})]
    return typed


def configured_classes(args: list[str]) -> dict[str, str]:
    """The model/data classes the given configs and options name (``section -> class_path``)."""
    import yaml

    found: dict[str, str] = {}
    for flag, value in itertools.pairwise(args):
        if flag in ("-c", "--config"):
            with contextlib.suppress(OSError, ValueError, yaml.YAMLError):
                config = yaml.safe_load(Path(value).read_text(encoding="utf-8")) or {}
                for section in ("model", "data"):
                    spec = config.get(section) if isinstance(config, dict) else None
                    if isinstance(spec, dict) and isinstance(spec.get("class_path"), str):
                        found[section] = spec["class_path"]
        elif flag in ("--model", "--data") and not value.startswith(("{", "-")):
            found[flag.removeprefix("--")] = value
    return found


def print_help_with_classes(parser: Any, args: list[str]) -> None:
    """``--help``, then the options and docstring of the model and data classes the config
    names (jsonargparse alone shows only ``--model.help CLASS``)."""
    with contextlib.suppress(SystemExit):
        parser.parse_args(["--help"])
    for section, class_path in configured_classes(args).items():
        print(f"\n{section}: {class_path} (from your config)\n")
        with contextlib.suppress(SystemExit):
            parser.parse_args([f"--{section}.help", class_path])
    raise SystemExit(0)


def invalid_yaml_file(argv: list[str]) -> str | None:
    """For a config that does not parse: the first ``-c`` file that is not valid YAML, with the
    line and column of the problem (the parser names no file), or None."""
    import yaml

    for flag, value in itertools.pairwise(argv):
        if flag not in ("-c", "--config"):
            continue
        try:
            yaml.safe_load(Path(value).read_text(encoding="utf-8"))
        except yaml.YAMLError as err:
            mark = getattr(err, "problem_mark", None)
            where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
            problem = getattr(err, "problem", None) or str(err).splitlines()[0]
            return (
                f"config file {value!r} is not valid YAML: {problem}{where}; expected YAML "
                "sections like model:, data:, trainer:; fix the syntax there"
            )
        except (OSError, UnicodeDecodeError):
            continue
    return None


def _undecodable(argv: list[str]) -> str:
    """The first ``-c``/``--config`` file that is not UTF-8 (the decoder names no file)."""
    for flag, value in itertools.pairwise(argv):
        if flag in ("-c", "--config"):
            try:
                Path(value).read_text(encoding="utf-8")
            except UnicodeDecodeError:
                return value
            except OSError:
                continue
    return "?"


class TrainkitCLI:
    """Parse the config, build model/data/trainer, and run one stage.

    ``TrainkitCLI()`` takes ``model.class_path``; ``TrainkitCLI(MyModel, MyData)`` fixes the classes
    (then ``model:`` holds MyModel's arguments directly), as in a user's own ``main.py``.
    """

    def __init__(
        self,
        model_class: type | None = None,
        datamodule_class: type | None = None,
        args: list[str] | None = None,
        run: bool = True,
        prog: str | None = None,
    ) -> None:
        argv = list(sys.argv[1:] if args is None else args)
        self.prog = prog or Path(sys.argv[0]).name if sys.argv and sys.argv[0] else "trainkit"
        if self.prog in ("__main__.py", "-c", ""):
            self.prog = "trainkit"
        self.subcommand = self._subcommand(argv)
        from jsonargparse import ArgumentError
        from omegaconf.errors import OmegaConfBaseException

        from trainkit.cli.parser import build_parser, instantiate
        from trainkit.errors import ConfigError

        hint = f"see {self.prog} {self.subcommand} --help"
        try:
            self.parser = build_parser(
                f"{self.prog} {self.subcommand}", model_class, datamodule_class, self.subcommand
            )
            if "-h" in argv[1:] or "--help" in argv[1:]:
                print_help_with_classes(self.parser, argv[1:])
            self.config = self.parser.parse_args(typed_device_options(argv[1:]))
            self.model, self.datamodule, self.trainer = instantiate(self.parser, self.config)
        except ArgumentError as err:
            from trainkit.cli.errors import summarize, unknown_options

            unknown = unknown_options(str(err), self.parser.get_defaults(), hint)
            broken = invalid_yaml_file(argv) if "Problems parsing config" in str(err) else None
            fail(unknown or broken or summarize(str(err), hint), self.prog)
        except ConfigError as err:
            fail(str(err), self.prog)
        except UnicodeDecodeError as err:
            fail(
                f"config file {_undecodable(argv)!r} is not UTF-8 text (byte "
                f"{err.object[err.start : err.start + 1]!r} at offset {err.start}); expected a "
                "UTF-8 YAML file; save it as UTF-8",
                self.prog,
            )
        except OmegaConfBaseException as err:
            reason = str(err).splitlines()[0]
            fail(
                f"config interpolation failed: {reason}; expected ${{section.key}} or "
                f"${{oc.env:VAR,default}}; {hint}",
                self.prog,
            )
        except ValueError as err:  # jsonargparse wraps what a class's __init__ rejected
            from trainkit.cli.errors import raised_in_init

            inner = _config_error_inside(err)
            rejected = raised_in_init(err, str(err)) if inner is None else None
            if inner is None and rejected is None:
                raise
            fail(str(inner) if inner is not None else rejected, self.prog)
        if run:
            self.result = self.run()

    def _subcommand(self, argv: list[str]) -> str:
        if not argv or argv[0] in ("-h", "--help"):
            print(top_help(self.prog))
            raise SystemExit(0 if argv else 2)
        if argv[0] == "--version":
            from trainkit import __version__

            print(f"trainkit {__version__}")
            raise SystemExit(0)
        if argv[0] not in SUBCOMMANDS:
            fail(
                f"subcommand {argv[0]!r}; expected one of {', '.join(SUBCOMMANDS)}; "
                f"see {self.prog} --help",
                self.prog,
            )
        return argv[0]

    def run(self) -> Any:
        """Call the Trainer method named by the subcommand."""
        from trainkit.checkpoint.io import CheckpointError
        from trainkit.cli.parser import check_ckpt_path
        from trainkit.errors import ConfigError, MisconfigurationError

        ckpt_path = self.config.get("ckpt_path")
        try:
            check_ckpt_path(ckpt_path, self.trainer.default_root_dir)
            if ckpt_path is not None and self.trainer.is_global_zero and not _launched_rank():
                from trainkit.checkpoint.state import resolve_path, verify

                trainer = self.trainer
                verify(
                    resolve_path(
                        ckpt_path,
                        trainer.checkpoint_callback,
                        trainer.default_root_dir,
                        trainer.checkpoint_weights_only,
                    ),
                    self.model,
                    self.trainer.checkpoint_weights_only,
                    full=self.subcommand == "fit",
                )
        except (FileNotFoundError, CheckpointError) as err:
            fail(str(err), self.prog)
        method = getattr(self.trainer, self.subcommand)
        try:
            result = method(self.model, datamodule=self.datamodule, ckpt_path=ckpt_path)
        except (ConfigError, CheckpointError, MisconfigurationError) as err:  # found by the Trainer
            fail(str(err), self.prog)
        if self.subcommand == "predict":
            self._save_predictions(result)
        return result

    def _save_predictions(self, predictions: Any) -> None:
        import torch

        trainer = self.trainer
        name = (
            "predictions.pt"
            if trainer.world_size == 1
            else f"predictions_rank{trainer.global_rank}.pt"
        )
        path = Path(trainer.log_dir) / name
        path.parent.mkdir(parents=True, exist_ok=True)
        torch.save(predictions, path)
        if trainer.is_global_zero:
            print(f"predictions saved to {path}", flush=True)
