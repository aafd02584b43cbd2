"""Third-party warning floods kept out of the user's way: each distinct warning shown once."""

from __future__ import annotations

import warnings
from typing import Any


def show_each_warning_once() -> None:
    """Print each distinct warning (category and text) once per process, whatever filters a
    library sets (some ask for 'always' and then warn on every step)."""
    original = warnings.showwarning
    seen: set[tuple[type, str]] = set()

    def show(
        message: Warning | str, category: type[Warning], filename: str, lineno: int, *rest: Any
    ) -> None:
        key = (category, str(message))
        if key not in seen:
            seen.add(key)
            original(message, category, filename, lineno, *rest)

    warnings.showwarning = show
