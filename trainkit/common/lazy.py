"""Names a package loads on first use (PEP 562). Each package's ``__init__`` lists them in
``_LAZY`` (name -> the module defining it) and, for type checkers, imports them under
``TYPE_CHECKING``; ``lazy_exports`` gives it the module ``__getattr__`` and ``__dir__``, so
importing the package imports none of those modules."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Iterable, Mapping
from typing import Any


def lazy_exports(
    package: str,
    names: Mapping[str, str],
    public: Iterable[str],
    subpackages: Iterable[str] = (),
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package``: a name of ``names`` is imported from its
    module when first read and kept in the package; a name of ``subpackages`` is the subpackage
    ``package.<name>``, imported on first use (``trainkit.callbacks``, as Lightning's
    ``pl.callbacks``); ``dir()`` lists ``public``."""
    listed = sorted(public)
    children = frozenset(subpackages)

    def __getattr__(name: str) -> Any:
        if name in names:
            value = getattr(importlib.import_module(names[name]), name)
            setattr(sys.modules[package], name, value)
            return value
        if name in children:
            return importlib.import_module(f"{package}.{name}")
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__() -> list[str]:
        return list(listed)

    return __getattr__, __dir__
