"""What a new user runs into in the first hour, through the command line as they type it: their
own package next to the config and files teammates can read (help that shows their classes:
tests/unit/cli/test_argv_help.py; mistakes and their one-line answers: tests/unit/cli/test_errors.py)."""

from __future__ import annotations

import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.command_env import cli_env, run_captured
from tests.helpers.user_project import make_project

pytestmark = pytest.mark.slow  # runs the installed console script in a new project

CONSOLE_SCRIPT = Path(sys.executable).with_name("trainkit")


def console(*args: str, cwd: Path, umask: int | None = None) -> subprocess.CompletedProcess:
    """The installed ``trainkit`` console script, run in ``cwd``."""
    return run_captured(
        [str(CONSOLE_SCRIPT), *args],
        cwd=cwd,
        timeout=360,
        env=cli_env(),
        umask=-1 if umask is None else umask,
    )


@pytest.fixture
def project(tmp_path):
    """A user's project folder: a package ``myproj`` and ``config.yaml``, nothing installed."""
    return make_project(tmp_path)


@pytest.mark.skipif(not CONSOLE_SCRIPT.exists(), reason="trainkit is not installed here")
def test_the_console_script_imports_the_users_package_and_writes_readable_files(project):
    """Run next to the code, as with python -m; checkpoints as readable as every other file."""
    result = console("fit", "-c", "config.yaml", cwd=project, umask=0o022)
    assert result.returncode == 0, result.stderr
    run = project / "trainkit_logs" / "version_0"
    modes = {
        path.name: stat.S_IMODE(path.stat().st_mode)
        for path in [run / "checkpoints" / "last.ckpt", run / "hparams.yaml", run / "config.yaml"]
    }
    assert set(modes.values()) == {0o644}, modes
