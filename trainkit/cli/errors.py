"""Turn jsonargparse's multi-line parse errors into one line: key, bad value, what was expected."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jsonargparse import Namespace

_KEY = re.compile(r'Parser key "([^"]+)"')
_GIVEN = re.compile(r"(?:Given value|Got value): ([^\n]+)")
_EXPECTED = re.compile(r"Expected a <class '([\w.]+)'>")
_CLASS_PATH = re.compile(r"Problem with given class_path '([^']+)':\s*\n\s*([^\n]+)")
_MISSING_FILE = re.compile(r"File does not exist: '([^']+)'")
_SUBTYPE = re.compile(r"Subtypes: \[<class '([\w.]+)'>")
_NESTED = re.compile(r"NestedArg\(key='([^']+)', val='([^']*)'\)")
_NOT_ACCEPTED = re.compile(r"Option '([^']+)' is not accepted")
_REQUIRED = re.compile(r"the following arguments are required: ([\w, ]+)")
EXAMPLES = {
    "TrainModule": "my_package.MyModel",
    "DataModule": "my_package.MyData",
    "Optimizer": "torch.optim.Adam",
    "LRScheduler": "torch.optim.lr_scheduler.StepLR",
}


def _init_arg(section: str, name: str) -> str:
    """``name``'s value inside a printed ``{'class_path': ..., 'init_args': {...}}``."""
    import ast

    try:
        return str(ast.literal_eval(section)["init_args"][name])
    except (ValueError, SyntaxError, KeyError, TypeError):
        return section


def summarize(message: str, help_hint: str) -> str:
    """One line for ``trainkit: error:``; falls back to the message with whitespace collapsed."""
    keys = _KEY.findall(message)
    key = keys[0] if keys else ""
    if len(keys) > 1:
        key = f"{keys[0]}.init_args.{keys[-1]}" if "class_path" in message else ".".join(keys)
    expected = [name for name in _EXPECTED.findall(message) if name != "NoneType"]
    given = _GIVEN.findall(message)
    value = given[-1].strip() if given else None
    nested = _NESTED.search(message)
    if nested:
        value = nested.group(2)
    if value and value.startswith("{") and "'init_args'" in value and len(keys) > 1:
        value = _init_arg(value, keys[-1])  # the value itself, not the whole class section
    class_problem = _CLASS_PATH.search(message)
    if class_problem and len(keys) <= 1:
        path, reason = class_problem.groups()
        return class_path_problem(key, path, reason.strip(), help_hint)
    missing = _MISSING_FILE.search(message)
    if missing:
        return f"{key or 'config'} file {missing.group(1)!r} does not exist; expected a readable YAML file; {help_hint}"
    stray = _stray_keys(value)
    if stray and key:
        return (
            f"{key} key{'s' if len(stray) > 1 else ''} {', '.join(map(repr, stray))} beside "
            "class_path and init_args; expected init arguments inside init_args; indent "
            f"{' and '.join(stray)} under {key}.init_args"
        )
    subtype = _SUBTYPE.search(message)
    if subtype and "." in subtype.group(1) and len(keys) <= 1 and value is not None:
        base = subtype.group(1).rsplit(".", 1)[-1]
        example = EXAMPLES.get(base, "my_package.MyClass")
        return (
            f"{key} {value!r} is not a {base}; expected a subclass of {base} by class name "
            f"or full class_path (e.g. {example}); {help_hint}"
        )
    if key and expected:
        named = logger_named(key, value)
        return (
            f"{key} {value!r}; expected {' or '.join(dict.fromkeys(expected))}; "
            + (f"did you mean {named}? (loggers are named by class) " if named else "")
            + help_hint
        )
    text = " ".join(message.split()).rstrip(".")
    if len(text) > 300:
        text = text[:297] + "..."
    return f"{text}; {help_hint}"


_CLASS_KEYS = ("class_path", "init_args", "dict_kwargs", "__path__")


def _stray_keys(value: str | None) -> list[str]:
    """The keys of a printed ``{'class_path': ..., ...}`` section that are none of a class
    section's own (a key indented beside init_args instead of under it)."""
    import ast

    if not value or not value.startswith("{") or "'class_path'" not in value:
        return []
    try:
        section = ast.literal_eval(value)
    except (ValueError, SyntaxError):
        return []
    if not isinstance(section, dict) or "class_path" not in section:
        return []
    return [str(name) for name in section if name not in _CLASS_KEYS]


_NO_MODULE = re.compile(r"No module named '([^']+)'")
_NO_ATTRIBUTE = re.compile(r"module '([^']+)' has no attribute '([^']+)'")


def class_path_problem(key: str, path: str, reason: str, help_hint: str) -> str:
    """Why ``path`` cannot be imported, and the fix that fits: where Python looks for the
    user's package, a dependency it lacks, or a misspelled class."""
    import os

    module = path.rpartition(".")[0]
    required = _REQUIRED.search(reason)
    if required:
        names = [name.strip() for name in required.group(1).split(",")]
        settings = ", ".join(f"{name}: ..." for name in names)
        return (
            f"{key} class_path {path!r} needs {', '.join(names)}; expected init_args with "
            f"them ({key}: {{class_path: {path}, init_args: {{{settings}}}}}); see "
            f"--{key}.help {path}"
        )
    unknown = _NOT_ACCEPTED.search(reason)
    if unknown:
        return unknown_init_argument(key, path, unknown.group(1), help_hint)
    missing = _NO_MODULE.search(reason)
    if missing and (module == missing.group(1) or module.startswith(missing.group(1) + ".")):
        return (
            f"{key} class_path {path!r}: module {missing.group(1)!r} was not found (looked in "
            f"{os.getcwd()!r} and the installed packages); expected an importable class like "
            "my_package.MyModel; run trainkit in the folder that holds your package, install "
            "it with pip install -e ., or add its folder to PYTHONPATH"
        )
    if missing:
        return (
            f"{key} class_path {path!r}: importing {module!r} failed ({reason}); install "
            f"what it imports (pip install {missing.group(1).partition('.')[0]})"
        )
    denied = _DENIED.search(reason)
    if denied:
        return _denied_import(key, path, denied.group(1))
    no_attribute = _NO_ATTRIBUTE.search(reason)
    if no_attribute:
        return (
            f"{key} class_path {path!r}: module {no_attribute.group(1)!r} has no "
            f"{no_attribute.group(2)!r}; check the class name; {help_hint}"
        )
    return (
        f"{key} class_path {path!r} cannot be used ({reason}); expected an importable class "
        f"like my_package.MyModel; {help_hint}"
    )


_DENIED = re.compile(r"not allowed, denied by the '([^']+)' entry of the import path denylist")


def _denied_import(key: str, path: str, entry: str) -> str:
    """A class path the import policy refuses (cli/import_policy.py), with the way to allow it."""
    from trainkit.cli.import_policy import ALLOWLIST_ENV

    if entry == "*":
        return (
            f"{key} class_path {path!r} is outside {ALLOWLIST_ENV}; expected a class of an "
            f"allowed package; add {path.partition('.')[0]!r} to {ALLOWLIST_ENV} if you trust it"
        )
    return (
        f"{key} class_path {path!r} names {entry!r}, which a config may not import (it runs "
        "commands or code by name); expected a model, data or callback class"
    )


_UNRECOGNIZED = re.compile(r"[Uu]nrecognized arguments: (.+)")
_UNKNOWN_KEYS = re.compile(r"does not accept options? (.+)")  # keys in a config file


def unknown_options(
    message: str, defaults: Namespace, help_hint: str, argv: list[str] | None = None
) -> str | None:
    """For options the parser does not know: the closest known one (options are never
    abbreviated, so ``--trainer.max_epoch`` is a typo, not a prefix); None for other errors.
    Unknown keys of the ``-c`` files in ``argv`` are named all at once (the parser stops at
    the first)."""
    import difflib

    in_config = _UNKNOWN_KEYS.search(message)
    if in_config:
        known_keys = list(defaults.keys())
        keys = re.findall(r"'([^']+)'", in_config.group(1))
        keys = list(dict.fromkeys([*keys, *unknown_config_keys(argv or [], known_keys)]))
        close = {key: difflib.get_close_matches(key, known_keys, n=1, cutoff=0.75) for key in keys}
        if len(keys) == 1:
            meant = [f"{match[0]!r}" for match in close.values() if match]
        else:
            meant = [f"{match[0]!r} for {key!r}" for key, match in close.items() if match]
        return (
            f"config key{'s' if len(keys) > 1 else ''} {', '.join(map(repr, keys))} unknown; "
            f"expected one listed by {help_hint.removeprefix('see ')}"
            + (f"; did you mean {', '.join(meant)}?" if meant else "")
        )
    found = _UNRECOGNIZED.search(message)
    if not found:
        return None
    given = found.group(1).split()[0].partition("=")[0]
    if not given.startswith("-") and given.endswith(CONFIG_SUFFIXES):
        return (
            f"unrecognized arguments: {given!r} is not an option; expected a config file after "
            f"-c; did you mean -c {given}?"
        )
    known = [f"--{key}" for key in defaults.keys()]  # noqa: SIM118 (a Namespace, not a dict)
    longer = [option for option in known if option.startswith(given)]  # never a prefix
    close = longer[:1] or difflib.get_close_matches(given, known, n=1, cutoff=0.75)
    suggestion = f"did you mean {close[0]}? " if close else ""
    return (
        f"unrecognized arguments: option {given!r} is unknown; expected one listed by "
        f"{help_hint.removeprefix('see ')}; {suggestion}(options are never abbreviated)"
    )


def also_unknown(argv: list[str], defaults: Namespace) -> str:
    """``; also unknown config keys ...`` with their closest known keys, for a line about
    another mistake of the same config (each mistake of a config found in one run), or ""."""
    import difflib

    known = list(defaults.keys())
    keys = unknown_config_keys(argv, known)
    if not keys:
        return ""
    meant = [
        f"{match[0]!r} for {key!r}"
        for key in keys
        if (match := difflib.get_close_matches(key, known, n=1, cutoff=0.75))
    ]
    return f"; also unknown config keys {', '.join(map(repr, keys))}" + (
        f" (did you mean {', '.join(meant)}?)" if meant else ""
    )


def unknown_config_keys(argv: list[str], known: list[str]) -> list[str]:
    """The dotted keys of the ``-c`` files in ``argv`` that no known key is or holds
    (``trainer.max_epoch``; ``model.init_args.x`` belongs to the class, so it is not read)."""
    import itertools
    from pathlib import Path

    import yaml

    known_set = set(known)

    def walk(node: object, prefix: str) -> list[str]:
        if not isinstance(node, dict):
            return []
        found: list[str] = []
        for name, value in node.items():
            key = f"{prefix}{name}"
            if key in known_set:
                continue
            if any(k.startswith(f"{key}.") for k in known_set):
                found += walk(value, f"{key}.")
            else:
                found.append(key)
        return found

    unknown: list[str] = []
    for flag, value in itertools.pairwise(argv):
        if flag not in ("-c", "--config"):
            continue
        try:
            unknown += walk(yaml.safe_load(Path(value).read_text(encoding="utf-8")), "")
        except (OSError, ValueError, yaml.YAMLError):
            continue
    return unknown


CONFIG_SUFFIXES = (".yaml", ".yml", ".json")
# what people type for a logger, and the class it names
LOGGER_CLASSES = {
    "csv": "CSVLogger",
    "tensorboard": "TensorBoardLogger",
    "tb": "TensorBoardLogger",
    "mlflow": "MLFlowLogger",
    "wandb": "WandbLogger",
}


def logger_named(key: str, value: object) -> str | None:
    """The logger class a loose ``trainer.logger`` value ('csv', 'tensorboard') means, or None."""
    if key != "trainer.logger" or not isinstance(value, str):
        return None
    word = value.strip("'\"").lower().removesuffix("logger")
    return LOGGER_CLASSES.get(word)


def unknown_init_argument(key: str, path: str, name: str, help_hint: str) -> str:
    """An init argument the class does not take: its accepted names and the closest one."""
    import difflib
    import importlib
    import inspect

    module, _, class_name = path.rpartition(".")
    try:
        cls = getattr(importlib.import_module(module), class_name)
        accepted = [p for p in inspect.signature(cls.__init__).parameters if p != "self"]
    except (ImportError, AttributeError, TypeError, ValueError):
        accepted = []
    accepted = [p for p in accepted if p not in ("args", "kwargs")]
    close = difflib.get_close_matches(name, accepted, n=1)
    return (
        f"{key}.init_args {name!r} is not an argument of {path}; expected one of "
        f"{', '.join(accepted) or '(none)'}; "
        + (f"did you mean {close[0]!r}? " if close else "")
        + f"see {help_hint.removeprefix('see ')} or --{key}.help {path}"
    )


def exception_chain(error: BaseException) -> list[BaseException]:
    """``error`` and the exceptions behind it (cause, else context), outermost first."""
    chain: list[BaseException] = []
    current: BaseException | None = error
    while current is not None and all(current is not seen for seen in chain):
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


@dataclass(frozen=True)
class InitFailure:
    """A model/data class that raised while it was built from the config: its section, class
    path, the arguments it got, and the exception it raised (the root of jsonargparse's wrap)."""

    section: str
    path: str
    arguments: str
    error: BaseException

    @property
    def call(self) -> str:
        return f"{self.section} {self.path}({self.arguments})"


def raised_in_init(error: BaseException, message: str) -> InitFailure | None:
    """When a model or data ``__init__`` raised on the values it was given: what raised it
    (the root cause jsonargparse wrapped), else None."""
    root = exception_chain(error)[-1]
    if root is error:
        return None
    tb = root.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    where = tb.tb_frame.f_code.co_filename if tb is not None else ""
    if "jsonargparse" in where:
        return None
    given = _GIVEN_CLASS.search(message)
    if given is None:
        return None
    path, arguments = given.groups()
    return InitFailure(_section_of(path), path, arguments or "", root)


def rejected_value(failure: InitFailure, where: str) -> str:
    """One line for a class that refused the values it was given (a ValueError its own
    ``__init__`` raised, or a library class's check): the class's message and where it is."""
    root = failure.error
    at = f" ({where})" if where else ""
    return (
        f"{failure.call} was rejected by the class{at}: {type(root).__name__}: {root}; expected "
        f"values {failure.path.rpartition('.')[2]} accepts; change {failure.section}.init_args"
    )


_GIVEN_CLASS = re.compile(r"Namespace\(class_path='([^']+)'(?:, init_args=Namespace\(([^)]*)\))?")


def _section_of(path: str) -> str:
    """The config section a class belongs in: model, data, optimizer or lr_scheduler."""
    import importlib

    module, _, name = path.rpartition(".")
    try:
        cls = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return "model"
    for base in type.mro(cls) if isinstance(cls, type) else ():
        if base.__name__ in ("DataModule", "LightningDataModule"):
            return "data"
        if base.__name__ == "LRScheduler":
            return "lr_scheduler"
        if base.__name__ == "Optimizer":
            return "optimizer"
    return "model"
