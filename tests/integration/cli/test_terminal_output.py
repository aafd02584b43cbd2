"""On a real terminal (a pseudo-terminal, as a person's shell gives it) the progress bars end
before the closing summary: no bar is redrawn into or after it."""

from __future__ import annotations

import os
import pty
import subprocess
import sys

import pytest

from tests.helpers.command_env import cli_env

pytestmark = pytest.mark.slow  # runs the CLI under a pseudo-terminal

CURSOR_UP, ERASE_LINE, BAR = "\x1b[1A", "\x1b[2K", "━"


def run_in_terminal(args: list[str], cwd) -> str:
    """What a terminal receives from ``python -m trainkit ARGS`` (stdout and stderr)."""
    controller, terminal = pty.openpty()
    env = cli_env(TERM="xterm-256color", COLUMNS="100", LINES="30")
    proc = subprocess.Popen(
        [sys.executable, "-m", "trainkit", *args],
        cwd=cwd,
        stdin=terminal,
        stdout=terminal,
        stderr=terminal,
        env=env,
        close_fds=True,
    )
    os.close(terminal)
    received = bytearray()
    try:
        while True:
            try:
                chunk = os.read(controller, 65536)
            except OSError:  # EIO: the terminal's other side closed
                break
            if not chunk:
                break
            received += chunk
        assert proc.wait(timeout=240) == 0, received.decode(errors="replace")[-2000:]
    finally:
        os.close(controller)
        if proc.poll() is None:
            proc.kill()
    return received.decode(errors="replace")


def test_the_closing_summary_comes_after_the_last_bar_on_a_terminal(tmp_path, autoencoder_config):
    screen = run_in_terminal(
        ["fit", "-c", autoencoder_config, "--trainer.max_epochs", "2", "--data.num_samples", "512"],
        tmp_path,
    )
    assert BAR in screen, "no rich bar was drawn: the test did not see a terminal"
    closing = screen.index("fit done in")
    after = screen[closing:]
    for drawing in (BAR, CURSOR_UP, ERASE_LINE):
        assert drawing not in after, f"the bar drew after the summary:\n{after!r}"
    assert "last checkpoint" in after and "logs " in after
