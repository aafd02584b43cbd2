"""Who launched us: torchrun, SLURM, MPI, trainkit's own launcher or nobody. First match wins."""

from __future__ import annotations

import os

import pytest

from trainkit.distributed.env import detect_environment
from trainkit.distributed.launchers.reexec import build_rank_command
from trainkit.distributed.rank_env import World
from trainkit.errors import ConfigError
from trainkit.strategies.parallel import resolve_backend


def test_no_variables_means_a_lone_process():
    env = detect_environment({})
    assert env.name == "none" and not env.external and env.world_size == 1


def test_torchrun_wins_over_everything():
    env = detect_environment(
        {
            "TORCHELASTIC_RUN_ID": "x",
            "WORLD_SIZE": "4",
            "RANK": "3",
            "LOCAL_RANK": "1",
            "GROUP_RANK": "1",
            "LOCAL_WORLD_SIZE": "2",
            "MASTER_ADDR": "10.1.1.1",
            "MASTER_PORT": "1234",
            "SLURM_NTASKS": "8",
            "SLURM_PROCID": "0",
        }
    )
    assert (env.name, env.world_size, env.global_rank, env.local_rank, env.node_rank) == (
        "torchrun",
        4,
        3,
        1,
        1,
    )
    assert (env.main_address, env.main_port) == ("10.1.1.1", 1234)


def test_slurm_job():
    env = detect_environment(
        {
            "SLURM_NTASKS": "8",
            "SLURM_PROCID": "5",
            "SLURM_LOCALID": "1",
            "SLURM_NODEID": "1",
            "SLURM_JOB_NUM_NODES": "2",
            "SLURM_NODELIST": "gpu[03-04]",
            "SLURM_JOB_ID": "4321",
            "SLURM_JOB_NAME": "train",
            "SLURM_STEP_ID": "0",
        }
    )
    assert (env.name, env.world_size, env.global_rank, env.local_rank, env.node_rank) == (
        "slurm",
        8,
        5,
        1,
        1,
    )
    assert (
        env.local_world_size == 4 and env.main_address == "gpu03" and env.main_port == 31544
    )  # 15000 + (job 4321 * 64 + step 0) % 20000: a port per job step


def test_interactive_slurm_shell_is_not_a_job():
    env = detect_environment({"SLURM_NTASKS": "1", "SLURM_PROCID": "0", "SLURM_JOB_NAME": "bash"})
    assert env.name == "none"


def test_open_mpi():
    env = detect_environment(
        {
            "OMPI_COMM_WORLD_SIZE": "4",
            "OMPI_COMM_WORLD_RANK": "2",
            "OMPI_COMM_WORLD_LOCAL_RANK": "0",
            "OMPI_COMM_WORLD_LOCAL_SIZE": "2",
            "MASTER_ADDR": "head",
        }
    )
    assert (env.name, env.world_size, env.global_rank, env.local_rank, env.node_rank) == (
        "mpi",
        4,
        2,
        0,
        1,
    )
    assert env.main_address == "head"


def test_trainkit_child():
    """A rank of trainkit's launcher is recognised by the mark the launcher sets."""
    env = detect_environment(
        {
            "TRAINKIT_LAUNCHED": "1",
            "LOCAL_RANK": "1",
            "WORLD_SIZE": "2",
            "RANK": "1",
            "LOCAL_WORLD_SIZE": "2",
            "MASTER_PORT": "5555",
        }
    )
    assert (env.name, env.global_rank, env.main_port) == ("trainkit", 1, 5555)


def test_build_rank_command_sets_every_variable_for_each_rank():
    world = World(local_world_size=2, num_nodes=2, node_rank=1, main_address="head", main_port=6000)
    argv, env = build_rank_command(
        1, world, ["python", "-m", "trainkit", "fit"], {"PATH": "/bin"}, "/tmp/err"
    )
    assert argv == ["python", "-m", "trainkit", "fit"]
    assert {
        k: env[k]
        for k in (
            "MASTER_ADDR",
            "MASTER_PORT",
            "WORLD_SIZE",
            "NODE_RANK",
            "LOCAL_RANK",
            "RANK",
            "LOCAL_WORLD_SIZE",
        )
    } == {
        "MASTER_ADDR": "head",
        "MASTER_PORT": "6000",
        "WORLD_SIZE": "4",
        "NODE_RANK": "1",
        "LOCAL_RANK": "1",
        "RANK": "3",
        "LOCAL_WORLD_SIZE": "2",
    }
    assert env["PATH"] == "/bin" and env["TRAINKIT_ERROR_FILE"] == "/tmp/err/rank1.json"


def test_backend_defaults_and_override(monkeypatch):
    monkeypatch.delenv("TRAINKIT_DISTRIBUTED_BACKEND", raising=False)
    assert resolve_backend("cpu") == "gloo" and resolve_backend("gpu") == "nccl"
    monkeypatch.setenv("TRAINKIT_DISTRIBUTED_BACKEND", "gloo")
    assert resolve_backend("gpu") == "gloo"
    monkeypatch.setenv("TRAINKIT_DISTRIBUTED_BACKEND", "smoke-signals")
    with pytest.raises(ConfigError, match="TRAINKIT_DISTRIBUTED_BACKEND 'smoke-signals'"):
        resolve_backend("cpu")


def test_only_the_requeue_signal_requeues_a_slurm_job(monkeypatch, capsys):
    """scancel (SIGTERM) cancels; sbatch --signal=USR1@N's SIGUSR1 requeues (checked with a real
    SLURM in tests/clusters/test_slurm_preemption.py); the signal is a setting."""
    from trainkit.distributed import slurm

    monkeypatch.setenv("SLURM_JOB_ID", "42")
    monkeypatch.delenv("TRAINKIT_REQUEUE_SIGNAL", raising=False)
    monkeypatch.setattr(slurm, "job_can_requeue", lambda job: (False, "asked"))
    slurm.requeue_after_preemption(True, "SIGTERM")
    said = capsys.readouterr().err
    assert "stopped by SIGTERM; not requeueing SLURM job 42: only SIGUSR1 requeues it" in said
    slurm.requeue_after_preemption(True, "SIGUSR1")  # goes on to ask SLURM
    assert "not requeueing SLURM job 42: asked" in capsys.readouterr().err
    monkeypatch.setenv("TRAINKIT_REQUEUE_SIGNAL", "term")
    slurm.requeue_after_preemption(True, "SIGTERM")
    assert "not requeueing SLURM job 42: asked" in capsys.readouterr().err
    monkeypatch.setenv("TRAINKIT_REQUEUE_SIGNAL", "HUP")
    with pytest.raises(ConfigError, match="TRAINKIT_REQUEUE_SIGNAL 'HUP'; expected USR1"):
        slurm.requeue_signal()


def test_a_killed_launchers_scratch_folder_is_swept_by_the_next(tmp_path):
    """A SIGKILLed launcher cannot remove its trainkit-errors-* folder; the next launcher removes
    the folders whose owner process is gone, and no other."""
    import subprocess

    from trainkit.distributed.scratch import sweep_orphans

    gone = subprocess.Popen(["true"])
    gone.wait()  # its pid names no process now
    orphan = tmp_path / f"trainkit-errors-{gone.pid}-abcd"
    alive = tmp_path / f"trainkit-errors-{os.getpid()}-efgh"
    other = tmp_path / f"trainkit-spawn-{gone.pid}-ijkl"  # another kind: swept by its own launcher
    for folder in (orphan, alive, other):
        (folder / "rank_board").mkdir(parents=True)
    assert sweep_orphans("errors", str(tmp_path)) == [orphan]
    assert not orphan.exists() and alive.exists() and other.exists()
