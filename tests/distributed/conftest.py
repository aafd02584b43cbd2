"""Multi-rank tests: real processes over gloo; each bounded in time and checked for leftovers."""

from __future__ import annotations

import subprocess
import sys
import time

import psutil
import pytest

from tests.conftest import cli_env

pytestmark = pytest.mark.distributed


def processes_mentioning(marker: str) -> list[psutil.Process]:
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if any(marker in part for part in proc.info["cmdline"] or ()):
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


@pytest.fixture
def no_leftovers(tmp_path):
    """After the test, no process whose command line mentions this test's folder may survive."""
    yield
    deadline = time.monotonic() + 5
    while processes_mentioning(str(tmp_path)) and time.monotonic() < deadline:
        time.sleep(0.1)
    leftovers = processes_mentioning(str(tmp_path))
    for proc in leftovers:
        proc.kill()
    assert not leftovers, f"orphaned processes: {[p.pid for p in leftovers]}"


@pytest.fixture
def start_cli(tmp_path, no_leftovers):
    """Start ``python -m trainkit ARGS --trainer.default_root_dir tmp_path`` (a Popen)."""
    started: list[subprocess.Popen] = []

    def start(*args: str, root=None, env=None) -> subprocess.Popen:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "trainkit",
                *args,
                "--trainer.default_root_dir",
                str(root or tmp_path),
            ],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env or cli_env(),
        )
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
