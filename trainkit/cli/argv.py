"""Reading a CLI's argv before the parser does: the subcommand, the top-level help, typed
device options, and help that shows the classes a config names. Nothing heavy is imported."""

from __future__ import annotations

import contextlib
import itertools
from pathlib import Path
from typing import TYPE_CHECKING

from trainkit.cli.failures import fail
from trainkit.cli.subcommands import SUBCOMMANDS

if TYPE_CHECKING:
    from jsonargparse import ArgumentParser

CONFIG_FLAGS = ("-c", "--config")


def top_help(prog: str) -> str:
    """The top-level ``--help``: subcommands, config sections and examples."""
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


def find_subcommand(argv: list[str], prog: str, names: tuple[str, ...] = tuple(SUBCOMMANDS)) -> int:
    """Where the subcommand is in ``argv`` (after any ``-c FILE`` for the whole command);
    prints the top-level help or the version and exits when that is what was asked."""
    position = 0
    while position < len(argv):
        arg = argv[position]
        if arg in CONFIG_FLAGS:
            position += 2
            continue
        if arg.startswith("--config="):
            position += 1
            continue
        if arg in ("-h", "--help"):
            break
        if arg == "--version":
            from trainkit import __version__

            print(f"trainkit {__version__}")
            raise SystemExit(0)
        if arg not in names:
            fail(f"subcommand {arg!r}; expected one of {', '.join(names)}; see {prog} --help", prog)
        return position
    print(top_help(prog))
    raise SystemExit(0 if argv else 2)


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
        if flag in CONFIG_FLAGS:
            with contextlib.suppress(OSError, ValueError, yaml.YAMLError):
                config = yaml.safe_load(Path(value).read_text(encoding="utf-8")) or {}
                for section in ("model", "data"):
                    spec = config.get(section) if isinstance(config, dict) else None
                    if isinstance(spec, dict) and isinstance(spec.get("class_path"), str):
                        found[section] = spec["class_path"]
        elif flag in ("--model", "--data") and not value.startswith(("{", "-")):
            found[flag.removeprefix("--")] = value
    return found


def wants_help(args: list[str]) -> bool:
    """Whether ``--help`` was asked for (not as the value of another option)."""
    return "-h" in args or "--help" in args


def print_help_with_classes(parser: ArgumentParser, args: list[str]) -> None:
    """``--help``, then the options and docstring of the model and data classes the config
    names (jsonargparse alone shows only ``--model.help CLASS``)."""
    with contextlib.suppress(SystemExit):
        parser.parse_args(["--help"])
    for section, class_path in configured_classes(args).items():
        print(f"\n{section}: {class_path} (from your config)\n")
        with contextlib.suppress(SystemExit):
            parser.parse_args([f"--{section}.help", class_path])
    raise SystemExit(0)
