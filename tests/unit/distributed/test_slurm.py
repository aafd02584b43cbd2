"""What trainkit reads from SLURM: each step of a job gets its own port, uneven steps give each
node its own task count, and a job whose resumed attempts keep training too few steps (start-up
eats the time window) is requeued a bounded number of times, then left to end, saying why."""

from __future__ import annotations

import pytest

from tests.helpers.launcher_env import SRUN_TASK
from trainkit.distributed.env import detect_environment
from trainkit.distributed.slurm import (
    MIN_STEPS_ENV,
    STALLED_ENV,
    expand_counts,
    max_stalled_requeues,
    requeue_after_preemption,
    requeue_min_steps,
    step_port,
)
from trainkit.errors import ConfigError
from trainkit.state import StopState


def test_an_attempt_with_too_few_steps_adds_to_the_stalled_count_and_progress_clears_it():
    fresh = StopState()
    assert fresh.stalled_now(global_step=3, min_steps=10) == 0  # a first attempt resumed nothing
    resumed = StopState(resumed_step=40, stalled_attempts=1)
    assert resumed.stalled_now(global_step=49, min_steps=10) == 2
    assert resumed.stalled_now(global_step=50, min_steps=10) == 0


def test_the_bound_is_a_setting_checked_up_front():
    assert max_stalled_requeues({}) == 2 and requeue_min_steps({}) == 10
    assert max_stalled_requeues({STALLED_ENV: "0"}) == 0
    assert requeue_min_steps({MIN_STEPS_ENV: "1"}) == 1
    with pytest.raises(ConfigError, match=f"{STALLED_ENV} 'many'; expected an int >= 0"):
        max_stalled_requeues({STALLED_ENV: "many"})


def test_past_the_bound_the_job_is_not_requeued_and_the_line_says_why(monkeypatch, capsys):
    monkeypatch.setenv("SLURM_JOB_ID", "77")
    monkeypatch.setenv(STALLED_ENV, "2")
    monkeypatch.setenv("PATH", "")  # scontrol is never reached
    requeue_after_preemption(True, "SIGUSR1", stalled=3)
    err = capsys.readouterr().err
    assert "not requeueing SLURM job 77: its last 3 resumed attempts each trained fewer than" in err
    assert f"({STALLED_ENV}=2, {MIN_STEPS_ENV}=10)" in err


def test_a_resumed_fit_that_stops_at_once_records_one_more_stalled_attempt(make_trainer, tmp_path):
    import torch

    from tests.helpers.models import Regression, regression_loader
    from trainkit.checkpoint.files import load_checkpoint

    first = make_trainer(max_epochs=1, enable_checkpointing=True)
    first.fit(Regression(), regression_loader())
    (last,) = tmp_path.glob("**/last.ckpt")
    saved = load_checkpoint(str(last))
    assert saved["stalled_attempts"] == 0  # it trained
    saved["stalled_attempts"] = 1  # as if one attempt had already stalled
    torch.save(saved, last)

    class StopsAtOnce(Regression):
        def on_train_start(self):
            self.trainer.should_stop = True  # stops before any step, as a preemption would

    again = make_trainer(max_epochs=2)
    again.fit(StopsAtOnce(), regression_loader(), ckpt_path=str(last))
    assert again.stalled_attempts == 2


def test_steps_of_one_job_and_first_steps_of_neighbouring_jobs_get_their_own_ports():
    ports = {step_port(job, step) for job in (100, 101) for step in range(8)}
    assert len(ports) == 16 and all(15000 <= port < 35000 for port in ports)
    assert detect_environment({**SRUN_TASK, "MASTER_PORT": "6000"}).port_fixed


def test_tasks_per_node_of_uneven_steps():
    assert expand_counts("2(x3),1") == [2, 2, 2, 1]
    task = {**SRUN_TASK, "SLURM_STEP_TASKS_PER_NODE": "2(x3),1", "SLURM_NODEID": "3"}
    assert detect_environment({**task, "SLURM_STEP_NUM_NODES": "4"}).local_world_size == 1
