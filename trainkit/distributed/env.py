"""Cluster environments: who started this process, and what rank it is. First match wins."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class ClusterEnvironment:
    """One process's place in a job: ranks, sizes and the rendezvous address."""

    name: str
    world_size: int = 1
    global_rank: int = 0
    local_rank: int = 0
    node_rank: int = 0
    local_world_size: int = 1
    main_address: str = "127.0.0.1"
    main_port: int = 0

    @property
    def external(self) -> bool:
        """Whether ranks were started by someone else (so trainkit starts no processes)."""
        return self.name != "none"


def _int(env: Mapping[str, str], key: str, default: int = 0) -> int:
    value = env.get(key)
    return int(value) if value not in (None, "") else default


def detect_torchelastic(env: Mapping[str, str]) -> ClusterEnvironment | None:
    if "TORCHELASTIC_RUN_ID" not in env:
        return None
    return ClusterEnvironment(
        "torchrun",
        _int(env, "WORLD_SIZE", 1),
        _int(env, "RANK"),
        _int(env, "LOCAL_RANK"),
        _int(env, "GROUP_RANK"),
        _int(env, "LOCAL_WORLD_SIZE", 1),
        env.get("MASTER_ADDR", "127.0.0.1"),
        _int(env, "MASTER_PORT"),
    )


def _first_slurm_host(nodelist: str) -> str:
    """``node[03-05,7],gpu1`` -> ``node03``."""
    match = re.match(r"([^,\[]+)(?:\[([^\]]+)\])?", nodelist.strip())
    if not match:
        return "127.0.0.1"
    prefix, ranges = match.groups()
    if not ranges:
        return prefix
    return prefix + ranges.split(",")[0].split("-")[0]


def detect_slurm(env: Mapping[str, str]) -> ClusterEnvironment | None:
    if "SLURM_NTASKS" not in env or env.get("SLURM_JOB_NAME") in ("bash", "interactive"):
        return None
    if "SLURM_PROCID" not in env:
        return None
    world = _int(env, "SLURM_NTASKS", 1)
    nodes = max(1, _int(env, "SLURM_JOB_NUM_NODES", _int(env, "SLURM_NNODES", 1)))
    address = env.get("MASTER_ADDR") or _first_slurm_host(env.get("SLURM_NODELIST", "127.0.0.1"))
    job_id = _int(env, "SLURM_JOB_ID")
    port = _int(env, "MASTER_PORT", 15000 + job_id % 20000)
    return ClusterEnvironment(
        "slurm",
        world,
        _int(env, "SLURM_PROCID"),
        _int(env, "SLURM_LOCALID"),
        _int(env, "SLURM_NODEID"),
        max(1, world // nodes),
        address,
        port,
    )


def detect_mpi(env: Mapping[str, str]) -> ClusterEnvironment | None:
    if "OMPI_COMM_WORLD_SIZE" in env:
        prefix = "OMPI_COMM_WORLD_"
        world, rank = _int(env, prefix + "SIZE", 1), _int(env, prefix + "RANK")
        local_rank, local_size = (
            _int(env, prefix + "LOCAL_RANK"),
            _int(env, prefix + "LOCAL_SIZE", 1),
        )
        node = _int(env, prefix + "NODE_RANK", rank // max(1, local_size))
    elif "PMI_SIZE" in env and "PMI_RANK" in env:
        world, rank = _int(env, "PMI_SIZE", 1), _int(env, "PMI_RANK")
        local_rank = _int(env, "MPI_LOCALRANKID", rank)
        local_size = _int(env, "MPI_LOCALNRANKS", world)
        node = rank // max(1, local_size)
    else:
        return None
    return ClusterEnvironment(
        "mpi",
        world,
        rank,
        local_rank,
        node,
        local_size,
        env.get("MASTER_ADDR", "127.0.0.1"),
        _int(env, "MASTER_PORT", 29500),
    )


def detect_trainkit(env: Mapping[str, str]) -> ClusterEnvironment | None:
    if "LOCAL_RANK" not in env or "WORLD_SIZE" not in env:
        return None
    return ClusterEnvironment(
        "trainkit",
        _int(env, "WORLD_SIZE", 1),
        _int(env, "RANK"),
        _int(env, "LOCAL_RANK"),
        _int(env, "NODE_RANK"),
        _int(env, "LOCAL_WORLD_SIZE", 1),
        env.get("MASTER_ADDR", "127.0.0.1"),
        _int(env, "MASTER_PORT"),
    )


DETECTORS = (detect_torchelastic, detect_slurm, detect_mpi, detect_trainkit)


def detect_environment(env: Mapping[str, str] | None = None) -> ClusterEnvironment:
    """The first environment whose variables are present, else a lone process ("none")."""
    env = os.environ if env is None else env
    for detector in DETECTORS:
        found = detector(env)
        if found is not None:
            return found
    return ClusterEnvironment("none")
