"""When trainkit settles collectives before a DataLoader forks its workers."""

from __future__ import annotations

import torch
from torch.utils.data import DataLoader, TensorDataset

from trainkit.distributed.fork_safety import forks_workers

DATA = TensorDataset(torch.arange(8.0))


def test_a_loader_without_workers_never_forks():
    assert not forks_workers(DataLoader(DATA, num_workers=0))


def test_a_loader_with_workers_forks_on_every_iteration():
    loader = DataLoader(DATA, num_workers=1)
    assert forks_workers(loader)
    list(loader)
    assert forks_workers(loader)


def test_persistent_workers_fork_only_the_first_time():
    loader = DataLoader(DATA, num_workers=1, persistent_workers=True)
    assert forks_workers(loader)
    list(loader)
    assert not forks_workers(loader)
