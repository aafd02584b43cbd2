"""A rank that trainkit's own launcher started (it sets ``TRAINKIT_LAUNCHED`` with torch's rank
variables and ``NODE_RANK``), whatever job (SLURM, a pod...) that launcher runs in."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Self

from trainkit.distributed.environments.base import ClusterEnvironment
from trainkit.distributed.signals import LAUNCHED_ENV


class TrainkitLauncherEnvironment(ClusterEnvironment):
    """The launcher started what the config asks for: no world to compare, and its restarts are
    its own (the parent's ``max_restarts``)."""

    name = "trainkit"
    creates_processes_externally = True  # by trainkit's launcher, in the parent process

    @classmethod
    def detect(cls, env: Mapping[str, str]) -> Self | None:
        if LAUNCHED_ENV not in env:
            return None
        return cls.from_rank_variables(env, "trainkit's launcher", "NODE_RANK")
