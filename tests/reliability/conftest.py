"""One uninterrupted run per world size, shared by the tests that compare a resumed run to it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import cli_env
from tests.reliability.runs import checkpoints, write_config


@pytest.fixture(scope="session")
def straight_run(tmp_path_factory):
    """``straight_run(devices)``: last.ckpt of the never-interrupted reference run."""
    done: dict[int, Path] = {}

    def run(devices: int) -> Path:
        if devices not in done:
            folder = tmp_path_factory.mktemp(f"straight{devices}")
            config = write_config(folder, devices=devices)
            result = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "trainkit",
                    "fit",
                    "-c",
                    str(config),
                    "--trainer.default_root_dir",
                    str(folder / "run"),
                ],
                cwd=folder,
                capture_output=True,
                text=True,
                timeout=120,
                env=cli_env(),
            )
            assert result.returncode == 0, result.stderr
            done[devices] = checkpoints(folder / "run")["last.ckpt"]
        return done[devices]

    return run
