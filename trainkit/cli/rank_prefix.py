"""``TRAINKIT_RANK_PREFIX=1``: every line a rank prints starts with ``[rank R]``, so that the
prints of several ranks in one log (a SLURM output file, a terminal) can be told apart."""

from __future__ import annotations

import os
import sys
from typing import TextIO

RANK_PREFIX_ENV = "TRAINKIT_RANK_PREFIX"


class PrefixedLines:
    """A text stream that writes each line into ``stream`` whole, ``prefix`` first: a line is
    held until it ends (or a flush), so the lines of ranks that share one output never run
    together (``print`` writes the text and its newline in two calls)."""

    def __init__(self, stream: TextIO, prefix: str) -> None:
        self.stream = stream
        self.prefix = prefix
        self.pending = ""  # the start of a line not ended yet
        self.mid_line = False  # a flush wrote the start of the current line, prefixed

    def write(self, text: str) -> int:
        if not text:
            return 0
        lines = (self.pending + text).splitlines(keepends=True)
        self.pending = "" if lines[-1].endswith(("\n", "\r")) else lines.pop()
        if lines:
            first = "" if self.mid_line else self.prefix
            rest = "".join(f"{self.prefix}{line}" for line in lines[1:])
            self.stream.write(f"{first}{lines[0]}{rest}")
            self.mid_line = False
        return len(text)

    def writelines(self, lines: list[str]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        if self.pending:
            self.stream.write(f"{'' if self.mid_line else self.prefix}{self.pending}")
            self.pending, self.mid_line = "", True
        self.stream.flush()

    def isatty(self) -> bool:
        return False  # no live bars through a prefix: plain lines

    def __getattr__(self, name: str) -> object:  # fileno, encoding, buffer, ...
        return getattr(self.stream, name)


def prefix_rank_output(env: dict[str, str] | os._Environ[str] = os.environ) -> bool:
    """With ``TRAINKIT_RANK_PREFIX`` set (not 0) in a rank (started by trainkit, torchrun,
    srun or mpirun): prefix this process's stdout and stderr lines with ``[rank R]``."""
    from trainkit.distributed.error_file import launcher_rank

    rank = launcher_rank()
    if env.get(RANK_PREFIX_ENV, "0") in ("", "0") or rank is None:
        return False
    if not isinstance(sys.stdout, PrefixedLines):
        sys.stdout = PrefixedLines(sys.stdout, f"[rank {rank}] ")  # type: ignore[assignment]
        sys.stderr = PrefixedLines(sys.stderr, f"[rank {rank}] ")  # type: ignore[assignment]
    return True
