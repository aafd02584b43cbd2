"""Limits where config text enters, checked before any YAML or omegaconf processing: a config
is trusted like code, but a mistake or a hostile file must end in one line, not in gigabytes of
memory or a crashed interpreter. Each option value and each ``-c`` file is checked for its size,
its nesting depth, the nodes its YAML aliases expand to, and the length its ``${...}``
interpolations expand to. Each limit is an environment variable (docs/reliability.md)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

from trainkit.errors import ConfigError

LIMITS = {  # variable: (default, what it bounds)
    "TRAINKIT_MAX_CONFIG_BYTES": (4 * 2**20, "bytes in one config file or option value"),
    "TRAINKIT_MAX_CONFIG_DEPTH": (64, "levels of nesting"),
    "TRAINKIT_MAX_CONFIG_NODES": (1_000_000, "values once YAML aliases are expanded"),
}
_REFERENCE = re.compile(r"\$\{([^${}]+)\}")
_CONFIG_FLAGS = ("-c", "--config")


def limit(variable: str) -> int:
    """A limit's value: its environment variable, else the default."""
    default, what = LIMITS[variable]
    given = os.environ.get(variable, "").strip()
    if not given:
        return default
    if not given.isdigit() or int(given) < 1:
        raise ConfigError(variable, given, f"a positive integer (the most {what})", "unset it")
    return int(given)


def check_config_inputs(argv: list[str]) -> None:
    """Every ``-c`` file and option value of ``argv`` within the limits, or a ConfigError."""
    for source, text in _inputs(argv):
        check_text(text, source)


def _inputs(argv: list[str]) -> Iterator[tuple[str, str]]:
    """(where it comes from, its text) for each config file and option value."""
    most = limit("TRAINKIT_MAX_CONFIG_BYTES")
    previous = ""
    for item in argv:
        flag, equals, inline = item.partition("=")
        if previous in _CONFIG_FLAGS or (equals and flag in _CONFIG_FLAGS):
            yield from _config_file(inline if equals else item, most)
        elif equals and flag.startswith("--"):
            yield flag, inline
        elif previous.startswith("--"):
            yield previous, item
        previous = "" if equals else item


def _config_file(name: str, most: int) -> Iterator[tuple[str, str]]:
    path = Path(name)
    try:
        size = path.stat().st_size
    except OSError:
        return  # missing or unreadable: the parser says so, naming the file
    if not path.is_file():
        return
    if size > most:
        raise _too_big(f"config file {name!r}", size, most)
    try:
        yield f"config file {name!r}", path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return  # reported by the parser with the file's name and the offending byte


def _too_big(source: str, size: int, most: int) -> ConfigError:
    return ConfigError(
        f"{source}: size",
        size,
        f"at most {most} bytes (TRAINKIT_MAX_CONFIG_BYTES)",
        "raise TRAINKIT_MAX_CONFIG_BYTES if a config this large is intended",
    )


def check_text(text: str, source: str) -> None:
    """One config text (a file or an option value) within every limit."""
    most = limit("TRAINKIT_MAX_CONFIG_BYTES")
    if len(text) > most:
        raise _too_big(source, len(text), most)
    deepest, allowed = nesting_depth(text), limit("TRAINKIT_MAX_CONFIG_DEPTH")
    if deepest > allowed:
        raise ConfigError(
            f"{source}: nesting depth",
            deepest,
            f"at most {allowed} levels (TRAINKIT_MAX_CONFIG_DEPTH)",
            "flatten it, or raise the limit if this depth is intended",
        )
    import yaml

    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)  # aliases stay shared: cheap
    except yaml.YAMLError:
        return  # not YAML: the parser reports it with the line and column
    if root is None:
        return
    nodes, most_nodes = expanded_nodes(root, {}), limit("TRAINKIT_MAX_CONFIG_NODES")
    if nodes > most_nodes:
        raise ConfigError(
            f"{source}: values once its YAML aliases are expanded",
            nodes,
            f"at most {most_nodes} (TRAINKIT_MAX_CONFIG_NODES)",
            "a config that repeats an anchor this often is an alias bomb; write it out, or "
            "raise the limit",
        )
    strings = dict(scalar_strings(root))
    for key in strings:
        try:
            length = interpolated_length(key, strings, {})
        except RecursionError:  # references chained deeper than Python's stack
            length = most + 1
        if length > most:
            raise ConfigError(
                f"{source}: {key!r} interpolated, in characters",
                length,
                f"at most {most} (TRAINKIT_MAX_CONFIG_BYTES)",
                "its ${...} references repeat each other: an interpolation bomb; fix them",
            )


def nesting_depth(text: str) -> int:
    """The deepest nesting of ``text``: indented blocks plus open ``[``/``{`` outside quotes,
    counted in one pass without recursion (a parser would overflow the stack first)."""
    deepest, flow, indents = 0, 0, []
    for line in text.splitlines():
        stripped = line.lstrip(" ")
        if stripped and not stripped.startswith("#") and flow == 0:
            indent = len(line) - len(stripped)
            while indents and indents[-1] >= indent:
                indents.pop()
            indents.append(indent)
        quote = ""
        for char in stripped:
            if quote:
                quote = "" if char == quote else quote
            elif char in "'\"":
                quote = char
            elif char == "#":
                break
            elif char in "[{":
                flow += 1
            elif char in "]}":
                flow = max(0, flow - 1)
            deepest = max(deepest, len(indents) + flow)
        deepest = max(deepest, len(indents) + flow)
    return deepest


def expanded_nodes(node: object, memo: dict[int, int]) -> int:
    """How many values ``node`` stands for with its aliases expanded (shared nodes counted each
    time they are referenced; a node that contains itself counts once)."""
    import yaml

    known = memo.get(id(node))
    if known is not None:
        return known
    memo[id(node)] = 1
    total = 1
    if isinstance(node, yaml.MappingNode):
        total += sum(expanded_nodes(k, memo) + expanded_nodes(v, memo) for k, v in node.value)
    elif isinstance(node, yaml.SequenceNode):
        total += sum(expanded_nodes(child, memo) for child in node.value)
    memo[id(node)] = total
    return total


def scalar_strings(node: object, prefix: str = "") -> Iterator[tuple[str, str]]:
    """(dotted key, text) of every scalar in a composed YAML mapping."""
    import yaml

    if isinstance(node, yaml.MappingNode):
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode):
                yield from scalar_strings(value, f"{prefix}{key.value}.")
    elif isinstance(node, yaml.ScalarNode) and prefix:
        yield prefix[:-1], str(node.value)


def interpolated_length(key: str, strings: dict[str, str], memo: dict[str, int]) -> int:
    """The length of ``key``'s text with its ``${other.key}`` references expanded (references
    to keys outside this text, resolvers and cycles count as written)."""
    known = memo.get(key)
    if known is not None:
        return known
    text = strings.get(key, "")
    memo[key] = len(text)  # a cycle stops here
    total = len(text)
    for reference in _REFERENCE.findall(text):
        name = reference.strip()
        if name in strings:
            total += interpolated_length(name, strings, memo) - len(reference) - 3
    memo[key] = total
    return total
