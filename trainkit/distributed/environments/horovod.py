"""Ranks that horovodrun started in its gloo mode (``horovodrun --gloo``, or where horovod has no
MPI): HOROVOD_RANK, _SIZE, _LOCAL_RANK, _LOCAL_SIZE and _CROSS_RANK (the node). horovodrun's MPI
mode runs mpirun, whose ranks are OpenMPI's. Its rendezvous is an HTTP server of horovod's own:
trainkit's rendezvous derives its port from it, one per run."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Self

from trainkit.distributed import slurm
from trainkit.distributed.environments.base import (
    ClusterEnvironment,
    LauncherWords,
    check_ranks,
    read_int,
    read_port,
)

PREFIX = "HOROVOD_"


class HorovodEnvironment(ClusterEnvironment):
    name = "horovod"
    creates_processes_externally = True
    launcher_words = LauncherWords(
        "horovodrun",
        "HOROVOD_LOCAL_SIZE",
        "horovodrun -np {n} on one host, -H host1:{n},host2:{n},... on several",
        "HOROVOD_SIZE / HOROVOD_LOCAL_SIZE",
        "horovodrun -H with {n} hosts",
    )
    restarted_by = (
        "horovodrun has none (its elastic mode is not supported): run the job again "
        "(fit resumes with --ckpt_path last)"
    )
    joins_horovod = True
    main_address_guessed = True  # horovodrun's host unless MASTER_ADDR says

    @classmethod
    def detect(cls, env: Mapping[str, str]) -> Self | None:
        if PREFIX + "RANK" not in env or PREFIX + "SIZE" not in env:
            return None
        world, rank = read_int(env, PREFIX + "SIZE", 1, low=1), read_int(env, PREFIX + "RANK")
        local_rank = read_int(env, PREFIX + "LOCAL_RANK")
        local_size = read_int(env, PREFIX + "LOCAL_SIZE", 1, low=1)
        check_ranks("horovodrun", world, rank, local_rank, local_size)
        nodes = max(1, -(-world // local_size))
        served = read_int(env, PREFIX + "GLOO_RENDEZVOUS_PORT")
        port, fixed = read_port(
            env, slurm.PORT_BASE + served % slurm.PORT_SPAN if served else 29500
        )
        server = env.get(PREFIX + "GLOO_RENDEZVOUS_ADDR", "")
        return cls(
            world,
            rank,
            local_rank,
            read_int(env, PREFIX + "CROSS_RANK"),
            local_size,
            main_address(env, nodes),
            port,
            num_nodes=nodes,
            rendezvous_id=f"horovodrun {server}:{served}" if served else "horovodrun",
            port_fixed=fixed,
        )


def main_address(env: Mapping[str, str], nodes: int) -> str:
    """Rank 0's address under horovodrun: MASTER_ADDR when given; 127.0.0.1 on one host; else
    the host horovodrun runs on (its rendezvous address), where rank 0 runs when horovodrun is
    started on the first host of ``-H`` (rank 0 checks it: strategies/horovod.py)."""
    address = env.get("MASTER_ADDR", "").strip()
    if address:
        return address
    if nodes == 1:
        return "127.0.0.1"
    return env.get(PREFIX + "GLOO_RENDEZVOUS_ADDR", "").strip() or "127.0.0.1"
