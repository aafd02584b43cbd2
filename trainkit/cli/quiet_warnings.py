"""Warnings as a user reads them: each distinct one shown once, and trainkit's own as one line
without trainkit's source (the user's code and settings are what it is about)."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path
from typing import Any

PACKAGE = Path(__file__).resolve().parents[1]  # trainkit/


def show_each_warning_once() -> None:
    """Print each distinct warning (category and text) once per process, whatever filters a
    library sets (some ask for 'always' and then warn on every step); a warning raised inside
    trainkit itself reads ``trainkit: warning: ...`` on one line."""
    original = warnings.showwarning
    seen: set[tuple[type, str]] = set()

    def show(
        message: Warning | str, category: type[Warning], filename: str, lineno: int, *rest: Any
    ) -> None:
        key = (category, str(message))
        if key in seen:
            return
        seen.add(key)
        if Path(filename).resolve().is_relative_to(PACKAGE):
            print(f"trainkit: warning: {message}", file=sys.stderr, flush=True)
        else:
            original(message, category, filename, lineno, *rest)

    warnings.showwarning = show
