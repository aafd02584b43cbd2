"""The variables real launchers give a process, copied from srun, salloc, sbatch and mpirun on a
real cluster: the shell of an allocation, a task of a step, a batch script, an MPI rank."""

from __future__ import annotations

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
