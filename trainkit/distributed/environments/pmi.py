"""Ranks that MPICH's or Intel MPI's mpiexec started (PMI variables): MPI ranks as OpenMPI's,
found by other variables."""

from __future__ import annotations

from collections.abc import Mapping
from typing import ClassVar, Self

from trainkit.distributed.environments.base import read_int
from trainkit.distributed.environments.open_mpi import OpenMPIEnvironment


class PMIEnvironment(OpenMPIEnvironment):
    address_fix: ClassVar[str] = "mpiexec -genv MASTER_ADDR $(hostname)"

    @classmethod
    def detect(cls, env: Mapping[str, str]) -> Self | None:
        if "PMI_SIZE" not in env or "PMI_RANK" not in env:
            return None
        world, rank = read_int(env, "PMI_SIZE", 1), read_int(env, "PMI_RANK")
        local_rank = read_int(env, "MPI_LOCALRANKID", rank)
        local_size = read_int(env, "MPI_LOCALNRANKS", world)
        nodes = max(1, -(-world // max(1, local_size)))
        return cls.from_mpi_ranks(env, (world, rank, local_rank, local_size, nodes), 29500, "mpi")
