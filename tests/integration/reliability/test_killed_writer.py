"""A process killed while it writes a checkpoint never leaves a truncated last.ckpt: the previous
one stays complete and loadable, and the next save clears the partial temp file."""

from __future__ import annotations

import signal
import time
from pathlib import Path

import pytest

from tests.integration.reliability.runs import write_config
from trainkit.checkpoint.files import load_checkpoint, save_checkpoint


@pytest.mark.timeout(120)
def test_sigkill_during_a_checkpoint_write_keeps_the_previous_last_ckpt(tmp_path: Path, start_cli):
    config = write_config(tmp_path, devices=1, ballast_mb=96)
    run = start_cli("fit", "-c", str(config), "--trainer.callbacks.every_n_train_steps", "1")
    folder: Path | None = None
    deadline = time.monotonic() + 180
    while time.monotonic() < deadline:  # wait for a last.ckpt, then for the next write to begin
        lasts = list(tmp_path.glob("**/checkpoints/last.ckpt"))
        if lasts:
            folder = lasts[0].parent
            if list(folder.glob(".last.ckpt.*.tmp")):
                run.send_signal(signal.SIGKILL)
                break
        assert run.poll() is None, run.stderr.read()
        time.sleep(0.001)
    run.wait(timeout=60)
    assert run.returncode == -signal.SIGKILL
    assert folder is not None, "no last.ckpt was written"
    partial = list(folder.glob(".last.ckpt.*.tmp"))
    assert partial, "the kill should have caught a write in progress"

    checkpoint = load_checkpoint(folder / "last.ckpt")  # complete, not truncated
    assert checkpoint["global_step"] >= 1
    assert checkpoint["state_dict"]["ballast"].numel() == 96 * 2**18

    save_checkpoint({"state_dict": {}}, folder / "last.ckpt")
    assert not list(folder.glob(".last.ckpt.*.tmp"))
    assert load_checkpoint(folder / "last.ckpt") == {"state_dict": {}}
