"""One uninterrupted run per world size, shared by the tests that compare a resumed run to it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.command_env import cli_env
from tests.helpers.in_process import command_state
from tests.helpers.session_runs import made_once
from tests.integration.reliability.runs import checkpoints, write_config


def _straight_run(folder: Path, devices: int) -> dict[str, Path]:
    """``trainkit fit`` of the shared config, run in this process (its ranks, if any, are
    processes of their own); its output goes to the asking test's captured output."""
    from trainkit.cli import main

    config = write_config(folder, devices=devices)
    with command_state(folder, cli_env()):  # its ranks import the model from tests/
        code = main(["fit", "-c", str(config), "--trainer.default_root_dir", str(folder / "run")])
    assert code == 0, f"the never-interrupted run of {devices} rank(s) ended with {code}"
    return {"last": checkpoints(folder / "run")["last.ckpt"]}


@pytest.fixture(scope="session")
def straight_run(tmp_path_factory, worker_id):
    """``straight_run(devices)``: last.ckpt of the never-interrupted reference run, made once in
    the session (the tests that compare with it run in every pytest-xdist worker)."""

    done: dict[int, Path] = {}

    def run(devices: int) -> Path:
        if devices not in done:
            made = made_once(
                tmp_path_factory,
                worker_id,
                f"straight{devices}",
                lambda folder: _straight_run(folder, devices),
            )
            done[devices] = made["last"]
        return done[devices]

    return run
