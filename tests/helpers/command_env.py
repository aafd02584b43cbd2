"""The environment a test gives a trainkit command (the repository importable, no rank
variables), and a command run to its end with its output captured."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# variables that would make a command join a job it was not started for
RANK_VARIABLES = (
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "TORCHELASTIC_RUN_ID",
    "SLURM_NTASKS",
    "OMPI_COMM_WORLD_SIZE",
    "TRAINKIT_GLOBAL_SEED",
    "NODE_RANK",
)


def cli_env(**extra: str) -> dict[str, str]:
    """The environment of a trainkit command a test starts: this process's, with the repository
    on PYTHONPATH, no rank variables, and ``extra``."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), env.get("PYTHONPATH", "")])
    for key in RANK_VARIABLES:
        env.pop(key, None)
    env.update(extra)
    return env


def run_captured(
    args: list[str],
    *,
    timeout: float,
    cwd: str | os.PathLike[str] | None = None,
    env: dict[str, str] | None = None,
    umask: int = -1,
) -> subprocess.CompletedProcess[str]:
    """``subprocess.run(args, capture_output=True, text=True, ...)``: a new interpreter (or any
    program) run to its end; ``timeout`` is a ceiling that only stops a hang (the command is
    killed, then ``subprocess.TimeoutExpired`` raised)."""
    return subprocess.run(
        args,
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=cwd,
        env=env,
        umask=umask,
        check=False,
    )
