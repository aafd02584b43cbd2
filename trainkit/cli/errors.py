"""Turn jsonargparse's multi-line parse errors into one line: key, bad value, what was expected."""

from __future__ import annotations

import re
from typing import Any

_KEY = re.compile(r'Parser key "([^"]+)"')
_GIVEN = re.compile(r"(?:Given value|Got value): ([^\n]+)")
_EXPECTED = re.compile(r"Expected a <class '([\w.]+)'>")
_CLASS_PATH = re.compile(r"Problem with given class_path '([^']+)':\s*\n\s*([^\n]+)")
_MISSING_FILE = re.compile(r"File does not exist: '([^']+)'")
_SUBTYPE = re.compile(r"Subtypes: \[<class '([\w.]+)'>")
_NESTED = re.compile(r"NestedArg\(key='([^']+)', val='([^']*)'\)")


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
    class_problem = _CLASS_PATH.search(message)
    if class_problem and len(keys) <= 1:
        path, reason = class_problem.groups()
        return class_path_problem(key, path, reason.strip(), help_hint)
    missing = _MISSING_FILE.search(message)
    if missing:
        return f"{key or 'config'} file {missing.group(1)!r} does not exist; expected a readable YAML file; {help_hint}"
    subtype = _SUBTYPE.search(message)
    if subtype and "." in subtype.group(1) and len(keys) <= 1 and value is not None:
        base = subtype.group(1).rsplit(".", 1)[-1]
        return (
            f"{key} {value!r} is not a known class; expected a subclass of {base} by class name "
            f"or full class_path (e.g. torch.optim.Adam); {help_hint}"
        )
    if key and expected:
        return f"{key} {value!r}; expected {' or '.join(dict.fromkeys(expected))}; {help_hint}"
    text = " ".join(message.split())
    if len(text) > 300:
        text = text[:297] + "..."
    return f"{text}; {help_hint}"


_NO_MODULE = re.compile(r"No module named '([^']+)'")
_NO_ATTRIBUTE = re.compile(r"module '([^']+)' has no attribute '([^']+)'")


def class_path_problem(key: str, path: str, reason: str, help_hint: str) -> str:
    """Why ``path`` cannot be imported, and the fix that fits: where Python looks for the
    user's package, a dependency it lacks, or a misspelled class."""
    import os

    module = path.rpartition(".")[0]
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


_UNRECOGNIZED = re.compile(r"[Uu]nrecognized arguments: (.+)")


def unknown_options(message: str, defaults: Any, help_hint: str) -> str | None:
    """For options the parser does not know: the closest known one (options are never
    abbreviated, so ``--trainer.max_epoch`` is a typo, not a prefix); None for other errors."""
    import difflib

    found = _UNRECOGNIZED.search(message)
    if not found:
        return None
    given = found.group(1).split()[0].partition("=")[0]
    known = [f"--{key}" for key in defaults.keys()]  # noqa: SIM118 (a Namespace, not a dict)
    close = difflib.get_close_matches(given, known, n=1, cutoff=0.75)
    suggestion = f"did you mean {close[0]}? " if close else ""
    return (
        f"unrecognized arguments: option {given!r} is unknown; expected one listed by "
        f"{help_hint.removeprefix('see ')}; {suggestion}(options are never abbreviated)"
    )
