"""Restarts that resume exactly: trainkit's launcher starts a failed job's ranks again from the
newest checkpoint (``max_restarts``), saying why each time; because resume is bitwise exact, a
job that crashed twice ends with the weights of one that never crashed. torchrun's own
``--max-restarts`` resumes the same way."""

from __future__ import annotations

import sys

import pytest

from tests.helpers.command_env import cli_env
from tests.integration.clusters.conftest import cluster_config, launch, trainkit_command
from tests.integration.reliability.runs import assert_same_weights, checkpoints
from trainkit.distributed.ports import find_free_port

pytestmark = pytest.mark.timeout(300)


def test_a_job_that_crashed_twice_ends_with_the_weights_of_one_that_never_crashed(
    tmp_path, straight_run, no_leftovers
):
    # checkpoints every 5 steps: the first run dies at step 7 (back to 5), the second at 13
    config = cluster_config(tmp_path, model="CrashingRegressor", crash_at=[7, 13])
    command = trainkit_command(config, tmp_path / "run", "--trainer.max_restarts", "2")
    done = launch(command, tmp_path, cli_env())
    output = done.stdout
    assert done.returncode == 0, output
    for number, step in ((1, 7), (2, 13)):
        assert (
            f"trainkit: rank 1 failed with exit code 1 (RuntimeError: injected failure at step "
            f"{step}); restart {number} of 2 in "
        ) in output, output
        assert f"trainkit: restart {number} (trainkit max_restarts): resuming from" in output
    assert_same_weights(straight_run(2), checkpoints(tmp_path / "run")["last.ckpt"])


def test_torchrun_max_restarts_resume_from_last(tmp_path, straight_run, no_leftovers):
    config = cluster_config(tmp_path, model="CrashingRegressor", crash_at=[7])
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc-per-node",
        "2",
        "--max-restarts",
        "1",
        "--master-port",
        str(find_free_port()),
        *trainkit_command(config, tmp_path / "run")[1:],  # -m trainkit fit ...
    ]
    done = launch(command, tmp_path, cli_env(TMPDIR=str(tmp_path)))  # torchrun's own temp folder
    assert done.returncode == 0, done.stdout
    assert "trainkit: restart 1 (torchrun --max-restarts): resuming from" in done.stdout
    assert_same_weights(straight_run(2), checkpoints(tmp_path / "run")["last.ckpt"])


@pytest.mark.slurm
def test_max_restarts_under_srun_with_a_task_per_rank_is_said_to_be_slurms(
    slurm, tmp_path, no_leftovers
):
    """srun started the ranks: trainkit restarts nothing there, and says so once at start-up
    (before, the setting was ignored without a word)."""
    config = cluster_config(tmp_path)
    command = trainkit_command(config, tmp_path / "run", "--trainer.max_restarts", "2")
    done = launch(["srun", "-n", "2", *command], tmp_path, slurm.env)
    assert done.returncode == 0, done.stdout
    said = [line for line in done.stdout.splitlines() if "max_restarts 2 is not used" in line]
    assert said == [
        "trainkit: max_restarts 2 is not used under slurm, which started the ranks: SLURM does "
        "(sbatch --requeue), or start one task per node (srun --ntasks-per-node=1) and trainkit "
        "starts that node's ranks and restarts them; a restarted job resumes from last.ckpt by "
        "itself"
    ], done.stdout
