"""A process nobody else started: trainkit starts the ranks the config asks for itself (from
``NODE_RANK MASTER_ADDR MASTER_PORT`` on several machines), or it is the only one."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Self

from trainkit.distributed.environments.base import ClusterEnvironment, read_int
from trainkit.errors import ConfigError

RANK_VARIABLES = ("WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE")


class LoneEnvironment(ClusterEnvironment):
    """Detected last, always (after refusing rank variables no launcher stands behind)."""

    name = "none"

    @classmethod
    def detect(cls, env: Mapping[str, str]) -> Self | None:
        refuse_stale_rank_variables(env)
        return cls()


def refuse_stale_rank_variables(env: Mapping[str, str]) -> None:
    """Rank variables with no launcher behind them (left in a shell, or copied from a job
    script) would make this lone process wait for peers that never start: one line instead.
    A world of one (WORLD_SIZE=1, ranks 0) is what a lone process is, and passes."""
    given = {key: env[key] for key in RANK_VARIABLES if env.get(key, "").strip()}
    if not given:
        return
    world, rank = read_int(env, "WORLD_SIZE", 1, low=1), read_int(env, "RANK")
    local_rank, local_size = (
        read_int(env, "LOCAL_RANK"),
        read_int(env, "LOCAL_WORLD_SIZE", 1, low=1),
    )
    if (world, rank, local_rank, local_size) == (1, 0, 0, 1):
        return
    raise ConfigError(
        "rank variables",
        " ".join(f"{key}={value}" for key, value in given.items()),
        "them only in ranks a launcher started (torchrun, srun, mpirun); none started this "
        "process, which would wait for its peers forever",
        f"unset {' '.join(given)} (trainkit starts its own ranks from trainer.devices and "
        "trainer.num_nodes), or start the job with torchrun",
    )
