"""Preemption under SLURM: a signal that arrives while the ranks are still starting stops them
gracefully (exit 75) instead of killing them; in a batch job that may be requeued, rank 0
requeues it after every rank saved, and the requeued job resumes from ``last`` by itself to the
weights of a run that was never stopped."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
import torch

from tests.integration.clusters.conftest import cluster_config, command_line, trainkit_command
from tests.integration.reliability.runs import assert_same_weights, checkpoints
from trainkit import PREEMPTED_EXIT_CODE

pytestmark = [pytest.mark.slurm, pytest.mark.timeout(300)]


def wait_for_files(paths, alive, what: str, timeout: float = 240) -> None:
    """Until every path exists; ``alive`` (a query to slurmctld) is asked twice a second."""
    deadline = time.monotonic() + timeout
    asked = 0.0
    while not all(path.exists() for path in paths):
        if time.monotonic() - asked >= 0.5:
            assert alive(), f"ended before {what}"
            asked = time.monotonic()
        assert time.monotonic() < deadline, f"no {what} after {timeout} s"
        time.sleep(0.05)


def training_batch_job(slurm, tmp_path, tasks: int = 2) -> tuple[str, Path]:
    """An sbatch job (--requeue, its log appended) whose ranks are training: returns the job id
    and its log once the third step is done. With 2 tasks, ``srun`` starts a rank per task; with
    1, the script is docs/clusters.md's ``exec trainkit ...``: trainkit's launcher is the batch
    shell and starts the 2 ranks."""
    started = tmp_path / "started"
    config = cluster_config(tmp_path, sleep_s=0.1, touch_file=str(started), touch_after_steps=3)
    script = tmp_path / "job.sh"
    command = trainkit_command(config, tmp_path / "run")
    line = command_line(["srun", *command]) if tasks > 1 else "exec " + command_line(command)
    script.write_text("#!/bin/bash\n" + line + "\n")
    log = tmp_path / "job.log"
    job = slurm.submit(
        "--requeue",
        f"--ntasks={tasks}",
        "--open-mode=append",
        "-o",
        str(log),
        "-D",
        str(tmp_path),
        str(script),
    )
    running = lambda: slurm.job_field(job, "JobState") in ("PENDING", "RUNNING")  # noqa: E731
    wait_for_files([started], running, "training")
    return job, log


def test_usr1_while_the_ranks_start_up_stops_them_gracefully(slurm, tmp_path, no_leftovers):
    built = tmp_path / "built"
    config = cluster_config(tmp_path, model="StartupProbe", created_file=str(built))
    name = f"early-{tmp_path.name}"
    srun = subprocess.Popen(
        ["srun", "-n", "2", "-J", name, *trainkit_command(config, tmp_path / "run")],
        cwd=tmp_path,
        env=slurm.env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        # both ranks are past their first instructions: the CLI has built the model, the
        # process group, the data and the loop are still ahead
        wait_for_files(
            [built.with_suffix(".0"), built.with_suffix(".1")], lambda: srun.poll() is None, "ranks"
        )
        assert slurm.run("scancel", "--signal=USR1", "--name", name).returncode == 0
        output, _ = srun.communicate(timeout=240)
    finally:
        if srun.poll() is None:
            srun.kill()
    assert srun.returncode == PREEMPTED_EXIT_CODE, output
    assert output.count("preempted (SIGUSR1)") == 1 and "Traceback" not in output, output
    assert "not requeueing SLURM job" in output and "not a batch job" in output, output
    step = torch.load(checkpoints(tmp_path / "run")["last.ckpt"], weights_only=True)["global_step"]
    assert step <= 2, output  # saved at the first safe point


def test_a_preempted_batch_job_requeues_itself_and_resumes_exactly(
    slurm, tmp_path, straight_run, no_leftovers
):
    job, log = training_batch_job(slurm, tmp_path)
    assert slurm.run("scancel", "--signal=USR1", job).returncode == 0
    slurm.wait_for_state(job, ("PENDING",))
    assert slurm.job_field(job, "Restarts") == "1", log.read_text()
    # SLURM holds a requeued job until the old job's credential expires (cred_expire=5 here,
    # 120 s by default); starting it earlier makes slurmd refuse it ("credential revoked")
    assert slurm.wait_job(job) == 0, log.read_text() + slurm.logs()  # the daemons' view too
    output = log.read_text()
    assert output.count("preempted (SIGUSR1)") == 1, output
    assert f"requeued SLURM job {job}" in output, output
    assert "restart 1 (SLURM requeue): resuming from" in output, output
    assert "was killed by SIGTERM" not in output, output  # SLURM's SIGTERM after a good save
    assert_same_weights(straight_run(2), checkpoints(tmp_path / "run")["last.ckpt"])


def test_the_exec_recipe_requeues_on_its_signal_and_blames_no_rank(
    slurm, tmp_path, straight_run, no_leftovers
):
    """docs/clusters.md's script without srun (``--signal=B:USR1@120``, ``exec trainkit``):
    SIGUSR1 reaches the batch shell, which is trainkit's launcher; rank 0 requeues the job once
    every rank saved, and SLURM then sends SIGTERM to every process of the job. That SIGTERM
    used to end rank 0 ("rank 0 was killed by SIGTERM"); the job now ends its attempt in 75,
    saying only what happened, and resumes."""
    job, log = training_batch_job(slurm, tmp_path, tasks=1)
    # what --signal=B:USR1@N sends before the time limit: SIGUSR1 to the batch shell only
    assert slurm.run("scancel", "--batch", "--signal=USR1", job).returncode == 0
    slurm.wait_for_state(job, ("PENDING",))
    assert slurm.job_field(job, "Restarts") == "1", log.read_text()
    assert slurm.wait_job(job) == 0, log.read_text() + slurm.logs()
    output = log.read_text()
    assert f"requeued SLURM job {job}" in output, output
    assert "preempted (SIGUSR1): every rank saved its state" in output, output
    assert "restart 1 (SLURM requeue): resuming from" in output, output
    for untrue in ("was killed by", "second SIG", "not requeueing", "Traceback"):
        assert untrue not in output, output
    assert_same_weights(straight_run(2), checkpoints(tmp_path / "run")["last.ckpt"])


def test_scontrol_requeue_by_hand_is_said_as_a_requeue(slurm, tmp_path, no_leftovers):
    """``scontrol requeue`` sends SIGTERM and requeues the job itself: rank 0 says so instead
    of "not requeueing" (only its own requeue follows SIGUSR1), and requeues nothing twice."""
    job, log = training_batch_job(slurm, tmp_path)
    assert slurm.run("scontrol", "requeue", job).returncode == 0
    said = f"stopped by SIGTERM; SLURM is requeueing job {job} itself (scontrol requeue"
    deadline = time.monotonic() + 120
    while said not in log.read_text():
        assert time.monotonic() < deadline, log.read_text() + slurm.logs()
        time.sleep(0.1)
    slurm.wait_for_state(job, ("PENDING", "RUNNING"))
    output = log.read_text()
    assert output.count("preempted (SIGTERM)") == 1, output
    assert "not requeueing" not in output and f"requeued SLURM job {job}" not in output, output
    assert slurm.job_field(job, "Restarts") == "1", output
    assert slurm.run("scancel", job).returncode == 0  # the requeued attempt is not needed


def test_scancel_of_a_running_batch_job_keeps_it_cancelled(slurm, tmp_path, no_leftovers):
    """scancel sends SIGTERM: the ranks save and stop, and the job is not requeued (only the
    requeue signal, SIGUSR1 by default, requeues it). Before, a cancelled job ran again."""
    job, log = training_batch_job(slurm, tmp_path)
    assert slurm.run("scancel", job).returncode == 0
    decided = ("not requeueing SLURM job", "requeued SLURM job")  # rank 0's last word, either way
    deadline = time.monotonic() + 120
    while not any(word in log.read_text() for word in decided) and time.monotonic() < deadline:
        time.sleep(0.1)
    slurm.wait_for_state(job, ("CANCELLED", "PENDING", "REQUEUED"))
    output = log.read_text()
    assert "preempted (SIGTERM)" in output, output + slurm.logs()
    assert f"stopped by SIGTERM; not requeueing SLURM job {job}: only SIGUSR1 requeues it" in output
    assert slurm.job_field(job, "JobState") == "CANCELLED", output
    assert slurm.job_field(job, "Restarts") == "0", output


def test_requeues_end_after_resumed_attempts_that_make_no_progress(slurm, tmp_path, no_leftovers):
    """Each attempt is preempted right after it starts training (as when start-up eats the
    time window): the first attempt is requeued, the resumed one trains too few steps and,
    with TRAINKIT_MAX_STALLED_REQUEUES=0, is not requeued; the log says why."""
    started = tmp_path / "started"
    config = cluster_config(tmp_path, sleep_s=0.1, touch_file=str(started), touch_after_steps=3)
    script = tmp_path / "job.sh"
    script.write_text(
        "#!/bin/bash\nexport TRAINKIT_REQUEUE_MIN_STEPS=1000 TRAINKIT_MAX_STALLED_REQUEUES=0\n"
        + command_line(["srun", *trainkit_command(config, tmp_path / "run")])
        + "\n"
    )
    log = tmp_path / "job.log"
    job = slurm.submit(
        "--requeue", "--ntasks=2", "--open-mode=append", "-o", str(log), "-D", str(tmp_path),
        str(script),
    )  # fmt: skip
    running = lambda: slurm.job_field(job, "JobState") in ("PENDING", "RUNNING")  # noqa: E731
    for attempt in range(2):
        wait_for_files([started], running, f"attempt {attempt} training")
        assert slurm.run("scancel", "--signal=USR1", job).returncode == 0
        if attempt == 0:  # requeued: the next attempt makes the file again
            slurm.wait_for_state(job, ("PENDING",))
            started.unlink()
    assert slurm.wait_job(job) == PREEMPTED_EXIT_CODE, log.read_text()
    output = log.read_text()
    assert slurm.job_field(job, "Restarts") == "1", output
    assert output.count(f"requeued SLURM job {job}") == 1, output
    assert (
        f"not requeueing SLURM job {job}: its last 1 resumed attempts each trained fewer than "
        "1000 steps"
    ) in output, output
