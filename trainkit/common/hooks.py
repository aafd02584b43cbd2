"""Whether an object redefines a hook of its base class: the loops call only the hooks a
callback, module or datamodule overrides."""

from __future__ import annotations


def overrides(obj: object, base: type, hook: str) -> bool:
    """Whether ``obj``'s class redefines ``hook`` (so calling it can do something)."""
    return getattr(type(obj), hook, None) is not getattr(base, hook, None)
