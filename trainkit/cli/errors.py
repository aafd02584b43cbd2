"""Turn jsonargparse's multi-line parse errors into one line: key, bad value, what was expected."""

from __future__ import annotations

import re

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
        return (
            f"{key} class_path {path!r} cannot be used ({reason.strip()}); expected an importable "
            f"class like my_package.MyModel; {help_hint}"
        )
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
