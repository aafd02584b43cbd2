"""What importing trainkit costs, measured in a new interpreter (nothing there yet): the
top-level help without torch, the callbacks without drawing libraries."""

from __future__ import annotations

import subprocess
import sys

from tests.helpers.command_env import cli_env


def test_top_level_help_lists_subcommands_without_importing_torch():
    code = "import sys\nfrom trainkit.cli import main\ntry:\n main(['--help'])\nexcept SystemExit:\n pass\nprint('torch' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=cli_env()
    ).stdout
    assert all(name in out for name in ("fit", "validate", "test", "predict"))
    assert out.strip().endswith("False")
