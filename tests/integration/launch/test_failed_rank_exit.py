"""A rank that fails reports its error, then ends with exit code 1 without interpreter
finalization: with a process group up, finalization could abort it (SIGABRT) while its peers
wait in a collective, and the scheduler would record a crash instead of the failure."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.helpers.command_env import cli_env
from trainkit.distributed.signals import ERROR_FILE_ENV

pytestmark = pytest.mark.slow  # starts ranks' interpreters

RANK = """
import atexit
import torch.distributed as dist
from trainkit.distributed.error_file import install_error_file_hook

atexit.register(print, "finalized")  # runs only if the interpreter finalizes
install_error_file_hook()  # before the group, as in a rank: torch wraps it in its own hook
dist.init_process_group("gloo", store=dist.HashStore(), rank=0, world_size=1)
{before_failure}
raise RuntimeError("injected failure")
"""


def run_rank(before_failure: str = "", **env: str) -> subprocess.CompletedProcess:
    script = RANK.format(before_failure=before_failure)
    return subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=240,
        env=cli_env(**env),
    )


@pytest.mark.timeout(150)
def test_under_an_external_launcher_the_whole_report_is_printed_then_exit_1():
    rank = run_rank(SLURM_PROCID="0", SLURM_NTASKS="2")
    assert rank.returncode == 1, rank.stderr
    assert "[rank0]: Traceback (most recent call last)" in rank.stderr  # torch's prefix kept
    assert "trainkit: rank 0 failed: RuntimeError: injected failure" in rank.stderr
    assert "finalized" not in rank.stdout


@pytest.mark.timeout(150)
def test_under_trainkits_launcher_the_error_file_is_written_then_exit_1(tmp_path):
    path = tmp_path / "error.json"
    rank = run_rank(**{ERROR_FILE_ENV: str(path), "RANK": "0"})
    assert rank.returncode == 1, rank.stderr
    assert "RuntimeError: injected failure" in path.read_text()
    assert "finalized" not in rank.stdout


@pytest.mark.timeout(150)
def test_without_a_process_group_python_finalizes_as_usual():
    rank = run_rank("dist.destroy_process_group()", SLURM_PROCID="0", SLURM_NTASKS="2")
    assert rank.returncode == 1, rank.stderr
    assert "trainkit: rank 0 failed: RuntimeError: injected failure" in rank.stderr
    assert "finalized" in rank.stdout
