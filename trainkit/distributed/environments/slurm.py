"""Tasks of an srun step (decided by the step variables, never by the job's name); a batch
script or salloc shell is no task: one with several tasks is an error (use srun).

With more tasks than nodes, every task is a rank (``SLURMEnvironment``). With one task on every
node of the step (``srun -n 1``, ``srun --pty bash``, ``srun --ntasks-per-node=1``), each task is
its node's launcher (``SLURMNodeEnvironment``): trainkit starts ``devices`` ranks there, like
torchrun, at the node rank and port the step gives."""

from __future__ import annotations

from collections.abc import Mapping

from trainkit.distributed import slurm
from trainkit.distributed.environments.base import (
    ClusterEnvironment,
    LauncherWords,
    NodePlacement,
    agreed_port,
    read_int,
    read_port,
)


class SLURMEnvironment(ClusterEnvironment):
    """Every task of the step is a rank."""

    name = "slurm"
    creates_processes_externally = True
    launcher_words = LauncherWords(
        "srun",
        "SLURM_STEP_TASKS_PER_NODE",
        "srun --ntasks-per-node={n}",
        "SLURM_STEP_NUM_NODES",
        "a job on {n} nodes (sbatch/salloc --nodes={n}) and srun across them",
        ", or srun --ntasks-per-node=1 and trainkit starts the ranks of each node itself",
    )
    restarted_by = (
        "SLURM does (sbatch --requeue), or start one task per node "
        "(srun --ntasks-per-node=1) and trainkit starts that node's ranks and restarts them"
    )

    @classmethod
    def detect(cls, env: Mapping[str, str]) -> SLURMEnvironment | None:
        if "SLURM_NTASKS" not in env:
            return None
        if not slurm.in_step(env):
            slurm.check_not_batch_with_tasks(env)
            return None
        world, nodes, local = slurm.step_shape(env)
        job, step = read_int(env, "SLURM_JOB_ID"), slurm.step_id(env)
        nodelist = env.get("SLURM_STEP_NODELIST") or env.get("SLURM_NODELIST", "127.0.0.1")
        port, fixed = read_port(env, slurm.step_port(job, step))
        kind = SLURMNodeEnvironment if world == nodes else SLURMEnvironment
        return kind(
            world,
            read_int(env, "SLURM_PROCID"),
            read_int(env, "SLURM_LOCALID"),
            read_int(env, "SLURM_NODEID"),
            local,
            env.get("MASTER_ADDR") or slurm.first_host(nodelist),
            port,
            num_nodes=nodes,
            rendezvous_id=f"slurm job {job} step {step}",
            port_fixed=fixed,
        )


class SLURMNodeEnvironment(SLURMEnvironment):
    """One task per node: the task is its node's launcher, the nodes are the step's (the world
    check compares them); trainkit starts the node's ranks."""

    name = "slurm-node"
    creates_processes_externally = False

    def node_placement(self, env: Mapping[str, str], num_nodes: int) -> NodePlacement:
        """The task's place in the step; the port derived from the job and step (the same on
        each node) unless MASTER_PORT says."""
        port = agreed_port(env)
        if not port and self.num_nodes > 1:
            port = str(self.main_port)
        return NodePlacement(self.node_rank, self.main_address, port)
