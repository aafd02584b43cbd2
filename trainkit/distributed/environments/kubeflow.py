"""A pod of a Kubeflow PyTorchJob: the training operator gives each pod ``MASTER_ADDR`` (the
Master pod's service), ``MASTER_PORT``, ``WORLD_SIZE`` and ``RANK``, one process per pod, inside
Kubernetes (``KUBERNETES_PORT``). Each pod is a node of one rank, as in Lightning's
KubeflowEnvironment: ``trainer.devices: 1`` and ``trainer.num_nodes`` = the pods."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Self

from trainkit.distributed.environments.base import ClusterEnvironment, LauncherWords

VARIABLES = ("KUBERNETES_PORT", "MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK")


class KubeflowEnvironment(ClusterEnvironment):
    name = "kubeflow"
    creates_processes_externally = True
    launcher_words = LauncherWords(
        "the PyTorchJob",
        "ranks per pod",
        "torchrun --nproc-per-node {n} as each pod's command (its ranks are torchrun's)",
        "WORLD_SIZE",
        "a PyTorchJob of {n} pods (Master: 1 replica, Worker: the others)",
    )
    restarted_by = "the PyTorchJob does (restartPolicy: OnFailure)"

    @classmethod
    def detect(cls, env: Mapping[str, str]) -> Self | None:
        if not all(env.get(key, "").strip() for key in VARIABLES):
            return None
        return cls.from_rank_variables(env, "the PyTorchJob", "RANK")
