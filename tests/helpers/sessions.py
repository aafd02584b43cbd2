"""A command run to its end in a session of its own: past its time limit the whole session
(the command and every rank it started) gets SIGTERM, then SIGKILL, so nothing outlives it."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Mapping
from pathlib import Path


def run_in_session(
    argv: list[str], cwd: Path, env: Mapping[str, str], timeout: float, grace: float = 30
) -> tuple[int | None, str]:
    """``argv``'s exit code (None: stopped at ``timeout``) and its output, stderr included."""
    proc = subprocess.Popen(
        argv,
        cwd=cwd,
        env=dict(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        output, _ = proc.communicate(timeout=timeout)
        return proc.returncode, output
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGTERM)  # a launcher tears its ranks down
        try:
            output, _ = proc.communicate(timeout=grace)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            output, _ = proc.communicate()
        return None, output
