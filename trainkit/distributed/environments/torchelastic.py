"""Ranks that torchrun (torch.distributed.elastic) started: ``TORCHELASTIC_RUN_ID`` and torch's
rank variables, the node in ``GROUP_RANK``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Self

from trainkit.distributed.environments.base import ClusterEnvironment, LauncherWords


class TorchElasticEnvironment(ClusterEnvironment):
    name = "torchrun"
    creates_processes_externally = True
    launcher_words = LauncherWords(
        "torchrun",
        "LOCAL_WORLD_SIZE",
        "torchrun --nproc-per-node {n}",
        "WORLD_SIZE / LOCAL_WORLD_SIZE",
        "torchrun --nnodes {n} on each of {n} nodes",
    )
    restarted_by = "torchrun restarts them (torchrun --max-restarts N)"
    store_outlives_restarts = True  # its static rendezvous keeps one store for every attempt

    @classmethod
    def detect(cls, env: Mapping[str, str]) -> Self | None:
        if "TORCHELASTIC_RUN_ID" not in env:
            return None
        return cls.from_rank_variables(env, "torchrun", "GROUP_RANK")
