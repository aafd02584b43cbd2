"""This process's environment: which cluster kind started it (the kinds and their registry are
in ``environments/``; this module keeps the import path) and whether its output is a terminal
a person watches."""

from __future__ import annotations

import os
import sys

from trainkit.distributed.environments import (
    ClusterEnvironment,
    NodePlacement,
    detect_environment,
)


def output_is_terminal() -> bool:
    """Whether stdout is a terminal a person watches. mpirun gives its ranks a pseudo-terminal
    even when its own output goes to a file, so MPI ranks count as not a terminal."""
    if "OMPI_COMM_WORLD_SIZE" in os.environ or "PMI_SIZE" in os.environ:
        return False
    return sys.stdout.isatty()


__all__ = ["ClusterEnvironment", "NodePlacement", "detect_environment", "output_is_terminal"]
