"""``is_param_in_hook_signature``: whether a hook accepts an argument (a hook may leave
``batch_idx`` or ``dataloader_idx`` out)."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any


def is_param_in_hook_signature(
    hook_fx: Callable[..., Any],
    param: str,
    explicit: bool = False,
    min_args: int | None = None,
) -> bool:
    """Whether ``hook_fx`` takes ``param`` by name, through ``*args`` (unless ``explicit``),
    or, with ``min_args``, has at least that many positional parameters."""
    parameters = inspect.signature(hook_fx).parameters
    if param in parameters:
        return True
    positional = [
        p for p in parameters.values() if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    if min_args is not None and len(positional) >= min_args:
        return True
    has_varargs = any(p.kind is p.VAR_POSITIONAL for p in parameters.values())
    return not explicit and has_varargs
