"""Who started this process, read from the variables real launchers set: an srun task, the shell
of a salloc allocation, an sbatch script, an mpirun rank, trainkit's launcher inside a job."""

from __future__ import annotations

import pytest

from tests.helpers.launcher_env import BATCH, MPIRUN_RANK_1, SALLOC, SRUN_TASK
from trainkit.distributed.env import detect_environment, output_is_terminal
from trainkit.distributed.rank_env import World, rank_env
from trainkit.errors import ConfigError


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
