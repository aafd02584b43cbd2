"""SLURM as users launch trainkit: ``srun`` inside ``salloc`` (a job named "interactive"), two
steps of one allocation at once, and a batch script with one task where trainkit starts the
ranks itself. Each trains exactly the world the config asks for, to the weights of trainkit's
own launcher."""

from __future__ import annotations

import json

import pytest

from tests.integration.clusters.conftest import (
    PYTHON,
    cluster_config,
    command_line,
    launch,
    q,
    shell,
    trainkit_command,
)
from tests.integration.reliability.runs import assert_same_weights, checkpoints

pytestmark = [pytest.mark.slurm, pytest.mark.timeout(300)]


def ranks(folder):
    return {p.name: json.loads(p.read_text()) for p in sorted((folder / "ranks").glob("*.json"))}


def test_two_srun_steps_inside_salloc_each_train_once_on_their_own_port(
    slurm, tmp_path, straight_run, no_leftovers
):
    """salloc names its job "interactive": the tasks of an srun step are still ranks (not
    launchers of ranks of their own). Two steps at once rendezvous on ports of their own, even
    with the first step's port held by an unrelated program."""
    steps = [tmp_path / f"step{i}" for i in range(2)]
    runs = [
        command_line(
            [
                "srun",
                "--overlap",
                "-n",
                "2",
                *trainkit_command(
                    cluster_config(step), step / "run", "--trainer.enable_progress_bar", "true"
                ),
            ]
        )
        for step in steps
    ]
    ready = tmp_path / "port_held"
    script = f"""
        {PYTHON} -m tests.integration.clusters.hold_port {q(ready)} 0 &
        holder=$!
        trap 'kill $holder' EXIT
        while [ ! -e {q(ready)} ]; do sleep 0.05; done
        {runs[0]} > {q(steps[0] / "log")} 2>&1 &
        first=$!
        {runs[1]} > {q(steps[1] / "log")} 2>&1 &
        second=$!
        codes=0
        wait $first || codes=$((codes + $?))
        wait $second || codes=$((codes + $?))
        exit $codes
    """
    done = launch(["salloc", "-n", "2", *shell(script)], tmp_path, slurm.env)
    logs = [(step / "log").read_text() for step in steps]
    assert done.returncode == 0, done.stdout + "\n".join(logs)
    for step, log in zip(steps, logs):
        assert log.count("training configuration") == 1, log  # one training, not two
        assert len(list((step / "run").glob("*/version_*"))) == 1, log
        assert [r["world_size"] for r in ranks(step).values()] == [2, 2], log
        assert_same_weights(straight_run(2), checkpoints(step / "run")["last.ckpt"])
    ports = {r["master_port"] for step in steps for r in ranks(step).values()}
    assert len(ports) == 2, ports  # each step's ranks share a port; the steps do not
    moved = [log for log in logs if "is taken" in log]
    assert len(moved) == 1 and f"rendezvous port {ready.read_text()} " in moved[0], logs


def test_with_one_task_per_node_trainkit_starts_the_ranks_itself(
    slurm, tmp_path, straight_run, no_leftovers
):
    """``srun -n 1`` (like an ``srun --pty bash`` shell) and a batch script with one task that
    runs trainkit without srun: trainkit's own launcher starts the ``devices: 2`` ranks."""
    runs = {name: tmp_path / name for name in ("srun", "sbatch")}
    configs = {name: cluster_config(folder) for name, folder in runs.items()}
    wrap = command_line(trainkit_command(configs["sbatch"], runs["sbatch"] / "run"))
    log = runs["sbatch"] / "job.log"
    job = slurm.submit("--ntasks=1", "-o", str(log), "-D", str(tmp_path), "--wrap", wrap)
    srun = launch(
        ["srun", "-n", "1", *trainkit_command(configs["srun"], runs["srun"] / "run")],
        tmp_path,
        slurm.env,
    )
    assert srun.returncode == 0, srun.stdout
    assert slurm.wait_job(job) == 0, log.read_text()
    for folder in runs.values():
        assert sorted(ranks(folder)) == ["rank0.json", "rank1.json"], srun.stdout
        assert_same_weights(straight_run(2), checkpoints(folder / "run")["last.ckpt"])
