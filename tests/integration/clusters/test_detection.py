"""Who started this process, read from the variables real launchers set (copied from srun,
salloc, sbatch and mpirun on a real cluster), and the small parts the cluster launches rely on:
per-step ports, the rendezvous beacon, signals held from start-up, resuming after a restart."""

from __future__ import annotations

import os
import signal
import socket

import pytest

from trainkit.distributed.env import detect_environment, output_is_terminal
from trainkit.distributed.rank_env import World, rank_env
from trainkit.distributed.rendezvous import candidate_ports, find_store_port, open_beacon
from trainkit.distributed.restarts import restart_checkpoint
from trainkit.distributed.signals import StopSignals, hold_stop_signals, installed_stop_signals
from trainkit.distributed.slurm import expand_counts, step_port
from trainkit.errors import ConfigError

SALLOC = {  # salloc -n 2: the shell of an allocation
    "SLURM_JOB_ID": "3",
    "SLURM_JOB_NAME": "interactive",
    "SLURM_NTASKS": "2",
    "SLURM_NNODES": "1",
    "SLURM_NODELIST": "vm",
    "SLURM_TASKS_PER_NODE": "2",
}
SRUN_TASK = {  # srun -n 2 inside it: task 1 of step 0
    **SALLOC,
    "SLURM_PROCID": "1",
    "SLURM_LOCALID": "1",
    "SLURM_NODEID": "0",
    "SLURM_STEP_ID": "0",
    "SLURM_STEPID": "0",
    "SLURM_STEP_NUM_TASKS": "2",
    "SLURM_STEP_NUM_NODES": "1",
    "SLURM_STEP_TASKS_PER_NODE": "2",
    "SLURM_STEP_NODELIST": "vm",
}
BATCH = {**SALLOC, "SLURM_JOB_NAME": "train", "SLURM_PROCID": "0", "SLURM_LOCALID": "0"}
MPIRUN_RANK_1 = {  # mpirun -np 2 on one node
    "OMPI_COMM_WORLD_SIZE": "2",
    "OMPI_COMM_WORLD_RANK": "1",
    "OMPI_COMM_WORLD_LOCAL_RANK": "1",
    "OMPI_COMM_WORLD_LOCAL_SIZE": "2",
    "OMPI_COMM_WORLD_NODE_RANK": "1",
    "OMPI_MCA_orte_num_nodes": "1",
    "OMPI_MCA_ess_base_jobid": "1036779521",
}


def test_an_srun_task_in_an_interactive_allocation_is_a_rank():
    env = detect_environment(SRUN_TASK)
    assert (env.name, env.world_size, env.global_rank, env.local_world_size) == ("slurm", 2, 1, 2)
    assert env.main_address == "vm" and env.rendezvous_id == "slurm job 3 step 0"


def test_a_step_with_one_task_per_node_starts_the_ranks_of_its_node():
    one = {**SRUN_TASK, "SLURM_PROCID": "0", "SLURM_LOCALID": "0", "SLURM_JOB_NAME": "bash"}
    one.update(SLURM_NTASKS="1", SLURM_STEP_NUM_TASKS="1", SLURM_STEP_TASKS_PER_NODE="1")
    env = detect_environment(one)  # srun --pty bash, then trainkit in that shell
    assert (env.name, env.creates_processes_externally, env.num_nodes) == ("slurm-node", False, 1)


def test_the_shell_of_an_allocation_with_one_task_is_no_rank():
    assert detect_environment({**SALLOC, "SLURM_NTASKS": "1"}).name == "none"


def test_a_batch_script_of_a_job_with_two_tasks_says_to_use_srun():
    with pytest.raises(ConfigError, match=r"SLURM_NTASKS 2; .*srun trainkit fit"):
        detect_environment(BATCH)


def test_a_rank_of_trainkits_launcher_inside_a_slurm_job_is_trainkits():
    # what trainkit's launcher gives its local rank 1 of 2 (rank_env), inside the job's variables
    launched = {**BATCH, "SLURM_NTASKS": "1", "TRAINKIT_ERROR_FILE": "/tmp/e"}
    env = detect_environment({**launched, **rank_env(World(local_world_size=2), 1, launched)})
    assert (env.name, env.global_rank) == ("trainkit", 1)


def test_steps_of_one_job_and_first_steps_of_neighbouring_jobs_get_their_own_ports():
    ports = {step_port(job, step) for job in (100, 101) for step in range(8)}
    assert len(ports) == 16 and all(15000 <= port < 35000 for port in ports)
    assert detect_environment({**SRUN_TASK, "MASTER_PORT": "6000"}).port_fixed


def test_tasks_per_node_of_uneven_steps():
    assert expand_counts("2(x3),1") == [2, 2, 2, 1]
    task = {**SRUN_TASK, "SLURM_STEP_TASKS_PER_NODE": "2(x3),1", "SLURM_NODEID": "3"}
    assert detect_environment({**task, "SLURM_STEP_NUM_NODES": "4"}).local_world_size == 1


def test_mpi_node_rank_comes_from_the_rank_not_ompi_node_rank():
    env = detect_environment(MPIRUN_RANK_1)
    assert (env.name, env.global_rank, env.local_rank, env.node_rank) == ("mpi", 1, 1, 0)
    second_node = {**MPIRUN_RANK_1, "OMPI_COMM_WORLD_SIZE": "4", "OMPI_COMM_WORLD_RANK": "3"}
    second_node.update(OMPI_MCA_orte_num_nodes="2", MASTER_ADDR="head")
    assert detect_environment(second_node).node_rank == 1


def test_mpirun_inside_a_slurm_batch_job_is_mpi():
    assert detect_environment({**BATCH, **MPIRUN_RANK_1}).name == "mpi"


def test_an_mpi_job_on_several_nodes_needs_master_addr():
    several = {**MPIRUN_RANK_1, "OMPI_MCA_orte_num_nodes": "2"}
    with pytest.raises(ConfigError, match=r"MASTER_ADDR ''; .*2 nodes; .*-x MASTER_ADDR="):
        detect_environment(several)


def test_mpiruns_pseudo_terminal_is_no_terminal(monkeypatch):
    monkeypatch.setenv("OMPI_COMM_WORLD_SIZE", "2")
    assert not output_is_terminal()


def test_ranks_find_their_steps_beacon_past_a_taken_port_and_another_steps_beacon():
    env = detect_environment(SRUN_TASK)
    first, second, third = candidate_ports(env.main_port)[:3]
    beacons = []
    with socket.socket() as taken:
        try:
            taken.bind(("", first))
        except OSError:
            pytest.skip(f"port {first} is in use here")
        taken.listen()  # an unrelated program that never answers
        try:
            beacons.append(open_beacon(env, b"trainkit 1111 slurm job 3 step 9 world 2\n"))
            beacons.append(open_beacon(env, b"trainkit 2222 slurm job 3 step 0 world 2\n"))
            assert [beacon.port for beacon in beacons] == [second, third]
            assert find_store_port(env, "slurm job 3 step 0 world 2", timeout=30) == 2222
        finally:
            for beacon in beacons:
                beacon.close()


def test_a_signal_held_from_start_up_is_handed_to_fit(tmp_path):
    previous = signal.getsignal(signal.SIGUSR1)
    with hold_stop_signals():
        os.kill(os.getpid(), signal.SIGUSR1)
        watcher = StopSignals()
        watcher.install()
        assert watcher.received == signal.SIGUSR1  # fit stops at its first safe point
        watcher.uninstall()
    assert signal.getsignal(signal.SIGUSR1) == previous and installed_stop_signals() is None


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
