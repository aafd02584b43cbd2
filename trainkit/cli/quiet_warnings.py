"""Warnings as a user reads them: each distinct one shown once, trainkit's own as one line
without trainkit's source (the user's code and settings are what it is about), and a library's
once per job, from rank 0, instead of once per rank."""

from __future__ import annotations

import os
import sys
import sysconfig
import warnings
from pathlib import Path
from typing import TextIO

from trainkit.distributed.error_file import launcher_rank

PACKAGE = Path(__file__).resolve().parents[1]  # trainkit/
LIBRARIES = tuple(
    Path(sysconfig.get_paths()[key]).resolve() for key in ("purelib", "platlib", "stdlib")
)
EVERY_RANK_ENV = "TRAINKIT_RANK_WARNINGS"  # "all": every rank shows the libraries' warnings too


def shown_by_rank_zero_only(filename: str) -> bool:
    """Whether this process leaves the warning to rank 0: it is a rank other than 0 and the
    warning comes from an installed library (identical on every rank), not from the user's code."""
    if (launcher_rank() or 0) == 0 or os.environ.get(EVERY_RANK_ENV) == "all":
        return False
    path = Path(filename).resolve()
    return any(path.is_relative_to(library) for library in LIBRARIES)


def show_each_warning_once() -> None:
    """Print each distinct warning (category and text) once per process, whatever filters a
    library sets (some ask for 'always' and then warn on every step); a warning raised inside
    trainkit itself reads ``trainkit: warning: ...`` on one line; on ranks other than 0 an
    installed library's warnings are left to rank 0 ($TRAINKIT_RANK_WARNINGS=all shows them)."""
    original = warnings.showwarning
    seen: set[tuple[type, str]] = set()

    def show(
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: TextIO | None = None,
        line: str | None = None,
    ) -> None:
        key = (category, str(message))
        if key in seen or shown_by_rank_zero_only(filename):
            return
        seen.add(key)
        if Path(filename).resolve().is_relative_to(PACKAGE):
            print(f"trainkit: warning: {message}", file=sys.stderr, flush=True)
        else:
            original(message, category, filename, lineno, file, line)

    warnings.showwarning = show
