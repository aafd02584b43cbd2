"""Restarts after a failure: a restarted job resumes from its last checkpoint unless told
otherwise, and restarts stop when they run out and never follow a stop or a preemption."""

from __future__ import annotations

from trainkit.distributed.restarts import Restarts, restart_checkpoint
from trainkit.distributed.signals import PREEMPTED_EXIT_CODE


def test_a_restarted_job_resumes_from_last_unless_told_otherwise(tmp_path, monkeypatch):
    (tmp_path / "v0" / "checkpoints").mkdir(parents=True)
    assert restart_checkpoint(None, str(tmp_path), False) is None  # a first run starts fresh
    monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", "1")
    assert restart_checkpoint(None, str(tmp_path), False) is None  # nothing saved yet
    (tmp_path / "v0" / "checkpoints" / "last.ckpt").write_bytes(b"")
    assert restart_checkpoint(None, str(tmp_path), False) == "last"
    assert restart_checkpoint("mine.ckpt", str(tmp_path), False) == "mine.ckpt"
    monkeypatch.setenv("TRAINKIT_AUTO_RESUME", "0")
    assert restart_checkpoint(None, str(tmp_path), False) is None


def test_restarts_stop_when_they_run_out_and_never_follow_a_stop_or_a_preemption(capsys):
    restarts = Restarts(max_restarts=1, first_backoff_s=0.0)
    assert not restarts.should_restart(PREEMPTED_EXIT_CODE, False, "rank 0 saved")
    assert not restarts.should_restart(1, True, "rank 0 failed after SIGTERM")
    assert restarts.should_restart(1, False, "rank 1 failed with exit code 1 (ValueError: x)")
    assert not restarts.should_restart(1, False, "rank 1 failed with exit code 1 (ValueError: y)")
    said = capsys.readouterr().err
    assert "(ValueError: x); restart 1 of 1 in 0 s: every rank starts again" in said
    assert "(ValueError: y); no restarts left (max_restarts 1)" in said


def test_the_wait_before_a_restart_starts_at_one_second_and_doubles_up_to_thirty():
    restarts = Restarts(max_restarts=10)
    waits = []
    for count in range(1, 8):
        restarts.count = count
        waits.append(restarts.backoff())
    assert waits == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
