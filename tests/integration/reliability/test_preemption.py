"""A stop signal (SIGTERM, SIGINT, SLURM's SIGUSR1) saves a resumable checkpoint once and exits 75;
``--ckpt_path last`` then finishes with the weights of a run that was never stopped."""

from __future__ import annotations

import signal
import sys
import time

import psutil
import pytest
import torch

from tests.helpers.command_env import cli_env
from tests.integration.reliability.runs import assert_same_weights, checkpoints, write_config
from trainkit import PREEMPTED_EXIT_CODE

pytestmark = pytest.mark.timeout(180)


def wait_for(path, proc, timeout=120.0):
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert proc.poll() is None, proc.stderr.read()
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.05)


def rank_process(launcher, local_rank):
    for child in psutil.Process(launcher.pid).children():
        if child.environ().get("LOCAL_RANK") == str(local_rank):
            return child
    raise AssertionError(f"no local rank {local_rank} under the launcher")


def interrupted(tmp_path, start_cli, devices, send):
    """Train, call ``send(proc)`` mid-run; the run must exit 75 with a mid-epoch last.ckpt.
    Returns its stderr."""
    started = tmp_path / "started"
    slow = write_config(tmp_path, devices, sleep_s=0.15, touch_file=str(started))
    run = start_cli("fit", "-c", str(slow), root=tmp_path / "b")
    wait_for(started, run)
    send(run)
    assert run.wait(timeout=120) == PREEMPTED_EXIT_CODE
    stderr = run.stderr.read()
    last = checkpoints(tmp_path / "b")["last.ckpt"]
    loops = torch.load(last, weights_only=True)["loops"]
    assert loops["epoch"] == 0 and 0 < loops["batches_in_epoch"] < 12 // devices  # mid-epoch
    return stderr


def interrupted_then_resumed(tmp_path, start_cli, run_main, straight_run, devices, send):
    """``interrupted``, then ``--ckpt_path last`` (run in this process: no signal goes to it)
    must end with the straight run's weights."""
    stderr = interrupted(tmp_path, start_cli, devices, send)
    resumed = run_main(
        "fit",
        "-c",
        str(write_config(tmp_path, devices)),
        "--ckpt_path",
        "last",
        "--trainer.default_root_dir",
        str(tmp_path / "b"),
        env=cli_env(),  # the ranks import the model from tests/
    )
    assert resumed.returncode == 0, resumed.stderr
    assert_same_weights(straight_run(devices), checkpoints(tmp_path / "b")["last.ckpt"])
    return stderr


def test_sigterm_to_the_launcher_stops_every_rank_saves_once_and_resumes_exactly(
    tmp_path, start_cli, run_main, straight_run
):
    stderr = interrupted_then_resumed(
        tmp_path, start_cli, run_main, straight_run, 2, lambda p: p.send_signal(signal.SIGTERM)
    )
    assert stderr.count("; saved ") == 1, stderr
    assert "preempted (SIGTERM)" in stderr and "--ckpt_path last" in stderr
    assert "Traceback" not in stderr


def test_sigterm_to_one_rank_stops_all_of_them_together(tmp_path, start_cli):
    """(Resuming is the same as after a signal to the launcher, tested above.)"""
    stderr = interrupted(
        tmp_path, start_cli, 2, lambda p: rank_process(p, 1).send_signal(signal.SIGTERM)
    )
    assert "preempted" in stderr and "Traceback" not in stderr


def test_slurm_sigusr1_preempts_a_single_process_run(tmp_path, start_cli, run_main, straight_run):
    stderr = interrupted_then_resumed(
        tmp_path, start_cli, run_main, straight_run, 1, lambda p: p.send_signal(signal.SIGUSR1)
    )
    assert "preempted (SIGUSR1)" in stderr


def test_ctrl_c_preempts_like_sigterm(tmp_path, start_cli):
    stderr = interrupted(tmp_path, start_cli, 1, lambda p: p.send_signal(signal.SIGINT))
    assert "preempted (SIGINT)" in stderr


def test_a_second_signal_stops_every_rank_at_once_without_saving(tmp_path, start_cli):
    started = tmp_path / "started"
    config = write_config(tmp_path, 2, sleep_s=5.0, touch_file=str(started), touch_after_steps=0)
    run = start_cli("fit", "-c", str(config))
    wait_for(started, run)
    run.send_signal(signal.SIGTERM)
    time.sleep(1.5)  # past the 1 s in which a repeat is the same signal (docs/reliability.md)
    run.send_signal(signal.SIGTERM)  # how soon it stops: scripts/bench_reliability.py
    code = run.wait(timeout=60)
    assert code == 128 + signal.SIGTERM
    assert "second SIGTERM" in run.stderr.read()
    assert "last.ckpt" not in checkpoints(tmp_path)


def test_fast_steps_compare_flags_less_often_yet_stop_together(tmp_path, start_cli):
    started = tmp_path / "started"
    config = write_config(
        tmp_path, 2, train_size=16_000, touch_file=str(started), touch_after_steps=300
    )
    run = start_cli("fit", "-c", str(config))
    wait_for(started, run)
    run.send_signal(signal.SIGTERM)
    assert run.wait(timeout=120) == PREEMPTED_EXIT_CODE, run.stderr.read()
    loops = torch.load(checkpoints(tmp_path)["last.ckpt"], weights_only=True)["loops"]
    assert loops["epoch"] == 0 and 300 <= loops["batches_in_epoch"] < 2000


def test_rounds_are_read_once_done_even_where_an_all_reduce_is_slower_than_the_interval():
    from trainkit.loops.preemption import MAX_GAP, proposed_gaps

    assert proposed_gaps(seconds_per_batch=0.002, round_seconds=0.0) == (25, 0)  # ~50 ms apart
    assert proposed_gaps(seconds_per_batch=1.0, round_seconds=0.0) == (1, 0)  # after every batch
    # a round that took 300 ms (an all-reduce over many ranks) at 10 ms steps: the next one is
    # read after 60 batches or more, not after 5 with the training thread waiting for it
    often, covering = proposed_gaps(seconds_per_batch=0.01, round_seconds=0.3)
    assert often == 5 and 60 <= covering <= 61
    assert proposed_gaps(seconds_per_batch=1e-9, round_seconds=10.0) == (MAX_GAP, MAX_GAP)


@pytest.mark.timeout(120)
def test_a_stop_signal_after_the_checkpoint_was_saved_keeps_exit_75(tmp_path):
    """A scheduler repeating its SIGTERM: once the stop's checkpoint is saved, a further stop
    signal ends the process with 75 (before, the default action ended it with 143)."""
    import subprocess

    marks = tmp_path / "marks"
    marks.mkdir()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "trainkit",
            "fit",
            "--model",
            "tests.helpers.mistakes.WaitsInTeardown",
            "--model.folder",
            str(marks),
            "--trainer.default_root_dir",
            str(tmp_path / "run"),
            "--trainer.enable_progress_bar",
            "false",
        ],
        env=cli_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_for(marks / "training", proc)
        proc.send_signal(signal.SIGTERM)  # the stop: saved at the next step
        wait_for(marks / "teardown", proc)
        proc.send_signal(signal.SIGTERM)  # repeated, after the save and the watch are over
        (marks / "release").touch()
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 75, err
    assert "preempted (SIGTERM)" in err, err
    assert "SIGTERM again; the checkpoint is saved, finishing the exit (75)" in err, err
