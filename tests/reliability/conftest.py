"""One uninterrupted run per world size, shared by the tests that compare a resumed run to it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import run_trainkit
from tests.reliability.runs import checkpoints, write_config


@pytest.fixture(scope="session")
def straight_run(tmp_path_factory):
    """``straight_run(devices)``: last.ckpt of the never-interrupted reference run."""
    done: dict[int, Path] = {}

    def run(devices: int) -> Path:
        if devices not in done:
            folder = tmp_path_factory.mktemp(f"straight{devices}")
            config = write_config(folder, devices=devices)
            result = run_trainkit(
                "fit",
                "-c",
                str(config),
                "--trainer.default_root_dir",
                str(folder / "run"),
                cwd=folder,
            )
            assert result.returncode == 0, result.stderr
            done[devices] = checkpoints(folder / "run")["last.ckpt"]
        return done[devices]

    return run
