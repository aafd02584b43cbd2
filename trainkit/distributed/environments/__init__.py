"""Cluster environments, one kind per file: who started this process, and what rank it is.
``ENVIRONMENTS`` is the registry, in the order of detection; the first kind whose variables are
present wins. A rank of trainkit's own launcher is always trainkit's, whatever job it runs in;
the lone process comes last and always matches (it refuses rank variables nobody set for it).

Adding a kind is one file (a ``ClusterEnvironment`` subclass with its ``detect`` and
capabilities) and one line here."""

from __future__ import annotations

import os
from collections.abc import Mapping

from trainkit.distributed.environments.base import (
    ClusterEnvironment,
    LauncherWords,
    NodePlacement,
)
from trainkit.distributed.environments.horovod import HorovodEnvironment
from trainkit.distributed.environments.kubeflow import KubeflowEnvironment
from trainkit.distributed.environments.lone import LoneEnvironment
from trainkit.distributed.environments.open_mpi import OpenMPIEnvironment
from trainkit.distributed.environments.pmi import PMIEnvironment
from trainkit.distributed.environments.slurm import SLURMEnvironment, SLURMNodeEnvironment
from trainkit.distributed.environments.torchelastic import TorchElasticEnvironment
from trainkit.distributed.environments.trainkit_launcher import TrainkitLauncherEnvironment

ENVIRONMENTS: tuple[type[ClusterEnvironment], ...] = (
    TrainkitLauncherEnvironment,
    TorchElasticEnvironment,
    HorovodEnvironment,
    OpenMPIEnvironment,
    SLURMEnvironment,
    PMIEnvironment,
    KubeflowEnvironment,
    LoneEnvironment,
)


def detect_environment(env: Mapping[str, str] | None = None) -> ClusterEnvironment:
    """The environment of the first kind whose variables ``env`` (default: this process's)
    holds."""
    env = os.environ if env is None else env
    for kind in ENVIRONMENTS:
        found = kind.detect(env)
        if found is not None:
            return found
    raise AssertionError("LoneEnvironment matches every environment")


__all__ = [
    "ENVIRONMENTS",
    "ClusterEnvironment",
    "HorovodEnvironment",
    "KubeflowEnvironment",
    "LauncherWords",
    "LoneEnvironment",
    "NodePlacement",
    "OpenMPIEnvironment",
    "PMIEnvironment",
    "SLURMEnvironment",
    "SLURMNodeEnvironment",
    "TorchElasticEnvironment",
    "TrainkitLauncherEnvironment",
    "detect_environment",
]
