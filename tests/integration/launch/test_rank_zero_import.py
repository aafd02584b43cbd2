"""``rank_zero_only.rank`` at import, in a new interpreter given the launcher's variables."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.helpers.command_env import cli_env


def rank_seen_at_import(**env: str) -> str:
    """What ``rank_zero_only.rank`` is right after ``import trainkit.utilities`` in a fresh
    interpreter with ``env``, and whether a decorated function runs there."""
    program = (
        "from trainkit.utilities import rank_zero_only\n"
        "import lightning_utilities.core.rank_zero as shared\n"
        "assert shared.rank_zero_only is rank_zero_only\n"
        "ran = rank_zero_only(lambda: 'ran')()\n"
        "print(rank_zero_only.rank, ran)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program],
        env=cli_env(**env),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


@pytest.mark.slow  # five fresh interpreters
def test_rank_zero_only_knows_the_rank_at_import_from_the_launchers_variables():
    """Before any Trainer exists (a program logging at start-up), as Lightning: RANK, then
    LOCAL_RANK, SLURM_PROCID, JSM_NAMESPACE_RANK; none set: rank 0."""
    assert rank_seen_at_import() == "0 ran"
    assert rank_seen_at_import(RANK="3", LOCAL_RANK="1") == "3 None"
    assert rank_seen_at_import(LOCAL_RANK="1") == "1 None"
    assert rank_seen_at_import(SLURM_PROCID="2") == "2 None"
    assert rank_seen_at_import(JSM_NAMESPACE_RANK="0") == "0 ran"
