"""Hostile input the launcher meets before any rank starts, refused in one line with exit 2:
a taken MASTER_PORT, rank variables left in a shell, a bad stop grace (the command runs in this
process and starts nothing)."""

from __future__ import annotations

import socket

import pytest

from tests.helpers.command_env import REPO, cli_env

FIT = ["fit", "-c", str(REPO / "configs" / "autoencoder.yaml")]


@pytest.mark.timeout(60)
def test_a_taken_master_port_is_named_before_any_rank_starts(run_main):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_main(*FIT, "--trainer.devices", "2", env=cli_env(MASTER_PORT=str(port)))
    assert result.returncode == 2, result.stderr
    assert result.stderr.strip() == (
        f"trainkit: error: MASTER_PORT {port}; expected a free port on 127.0.0.1; Address already "
        "in use; unset MASTER_PORT to let trainkit pick one"
    )


@pytest.mark.timeout(120)
def test_rank_variables_left_in_a_shell_end_in_one_line_not_a_hang(run_main):
    """The reported command: before, it printed nothing and never ended."""
    result = run_main(*FIT, env=cli_env(LOCAL_RANK="0", WORLD_SIZE="2"))
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("trainkit: error: rank variables"), lines
    assert "unset WORLD_SIZE LOCAL_RANK" in lines[0]


@pytest.mark.timeout(60)
def test_a_bad_stop_grace_is_named_before_any_rank_starts(run_main):
    result = run_main(*FIT, "--trainer.devices", "2", env=cli_env(TRAINKIT_STOP_GRACE="-1"))
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "trainkit: error: TRAINKIT_STOP_GRACE '-1'; expected seconds > 0; unset it for 120"
    ]
