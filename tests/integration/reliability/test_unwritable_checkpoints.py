"""A checkpoint folder that refuses a write (the disk fills up, the folder turns read-only mid-run)
ends the run with exit 1 and one line: what, where, the space, and the newest complete
checkpoint there, which stays intact; the same line whether the save ran on the training thread
or in the background (AsyncCheckpointIO), and on one process or two ranks."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch
import yaml

from tests.integration.reliability.mounts import bound_to_itself, make_read_only, small_disk
from tests.integration.reliability.runs import write_config
from trainkit.checkpoint.files import CheckpointError, save_checkpoint

pytestmark = pytest.mark.timeout(240)

SAVES = {"sync": None, "async": "AsyncCheckpointIO"}


def config_saving_into(tmp_path: Path, devices: int, save: str, dirpath: Path | None) -> Path:
    """The reliability config with 1 MiB checkpoints every 5 steps (all kept), into ``dirpath``
    (None: the run's own checkpoints folder)."""
    path = write_config(tmp_path, devices, ballast_mb=1, sleep_s=0.05)
    config = yaml.safe_load(path.read_text())
    if dirpath is not None:
        config["trainer"]["callbacks"][0]["init_args"]["dirpath"] = str(dirpath)
    if SAVES[save]:
        config["trainer"]["plugins"] = SAVES[save]
    path.write_text(yaml.safe_dump(config))
    return path


def complete_checkpoints(folder: Path) -> list[Path]:
    """The checkpoints in ``folder``, each checked to load whole."""
    found = sorted(folder.glob("**/*.ckpt"))
    for path in found:
        assert "state_dict" in torch.load(path, weights_only=True), path
    return found


def error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("trainkit: error:")]


@pytest.mark.parametrize("save", SAVES)
def test_a_full_disk_ends_the_run_in_one_line_naming_the_space_and_the_last_checkpoint(
    tmp_path, run_main, save
):
    with small_disk(tmp_path / "disk", "2600k") as disk:  # two 1 MiB checkpoints, not three
        config = config_saving_into(tmp_path, 1, save, dirpath=disk)
        result = run_main("fit", "-c", str(config), "--trainer.default_root_dir", str(tmp_path))
        kept = complete_checkpoints(disk)
    assert result.returncode == 1, result.stderr
    (line,) = error_lines(result.stderr)  # the one error (a warning of the run may come before)
    assert "Traceback" not in result.stderr, result.stderr
    failed = disk / "epoch=0-step=10.ckpt"
    assert line.startswith(
        f"trainkit: error: disk full while writing checkpoint {str(failed)!r}: it needs about "
        "1.0 MiB, "
    ), line
    assert "MiB are free there (No space left on device)" in line, line
    assert len(kept) == 2 and f"the newest complete checkpoint there is '{disk}/" in line, line
    assert "free space there, or save to another disk" in line, line
    assert not list(disk.glob(".*.tmp"))  # no partial file left


@pytest.mark.parametrize("save", SAVES)
def test_an_output_folder_made_read_only_mid_run_ends_in_one_line(tmp_path, start_cli, save):
    with bound_to_itself(tmp_path / "out") as out:
        config = config_saving_into(tmp_path, 1, save, dirpath=None)
        run = start_cli("fit", "-c", str(config), root=out)
        deadline = time.monotonic() + 120
        while not list(out.glob("**/checkpoints/*.ckpt")):  # the first checkpoint is written
            assert run.poll() is None, run.stderr.read()
            assert time.monotonic() < deadline, "no checkpoint after 60 s"
            time.sleep(0.02)
        make_read_only(out)
        _, stderr = run.communicate(timeout=240)
        kept = complete_checkpoints(out)
    assert run.returncode == 1, stderr
    (line,) = error_lines(stderr)  # the one error (a warning of the run may come before)
    assert "Traceback" not in stderr, stderr
    assert line.startswith("trainkit: error: cannot write checkpoint "), line
    assert ": Read-only file system in " in line and "make it writable" in line, line
    assert kept and any(
        f"the newest complete checkpoint there is '{path}'" in line for path in kept
    )


def test_two_ranks_say_it_once_and_blame_the_rank_that_could_not_write(tmp_path, start_cli):
    """Rank 0 says what failed and exits 1; rank 1, which only lost contact with it, is not
    blamed and its traceback is not shown."""
    with bound_to_itself(tmp_path / "out") as out:
        config = config_saving_into(tmp_path, 2, "sync", dirpath=out)
        run = start_cli("fit", "-c", str(config), root=tmp_path / "run")
        deadline = time.monotonic() + 120
        while not list(out.glob("*.ckpt")):
            assert run.poll() is None, run.stderr.read()
            assert time.monotonic() < deadline, "no checkpoint after 60 s"
            time.sleep(0.02)
        make_read_only(out)
        _, stderr = run.communicate(timeout=240)
        assert complete_checkpoints(out)
    assert run.returncode == 1, stderr
    (line,) = error_lines(stderr)
    assert "Read-only file system" in line, stderr
    assert "trainkit: rank 0 failed with exit code 1; stopped the other ranks" in stderr, stderr
    assert "Traceback" not in stderr, stderr


def test_a_full_disk_is_named_with_the_bytes_needed_and_leaves_no_temp_file(tmp_path):
    """torch reports ENOSPC as 'inline_container.cc:672 unexpected pos': say what happened."""
    with small_disk(tmp_path / "small-disk", "256k") as disk:
        path = disk / "last.ckpt"
        with pytest.raises(CheckpointError) as err:
            save_checkpoint({"state_dict": {"w": torch.zeros(512, 512)}}, path)
        assert str(err.value).startswith(
            f"disk full while writing checkpoint {str(path)!r}: it needs about 1.0 MiB, 0.2 MiB "
            "are free there"
        ), err.value
        assert list(disk.iterdir()) == []  # the partial temp file is gone
