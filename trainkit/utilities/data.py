"""What a program asks about its data: the batch size in a batch, whether a loader has a length
(on every rank), a suggested ``num_workers``."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import torch
from lightning_utilities.core.rank_zero import rank_zero_warn
from torch import Tensor
from torch.utils.data import IterableDataset

from trainkit import combined_loader
from trainkit.batch_size import extract_batch_size, is_dataclass_instance

if TYPE_CHECKING:
    from trainkit.strategies.base import Strategy

__all__ = [
    "BType",
    "extract_batch_size",
    "has_iterable_dataset",
    "has_len",
    "has_len_all_ranks",
    "is_dataclass_instance",
    "sized_len",
    "suggested_max_num_workers",
]

BType = Tensor | str | Mapping[Any, "BType"] | Iterable["BType"]


def has_iterable_dataset(dataloader: object) -> bool:
    """Whether ``dataloader`` reads an ``IterableDataset``."""
    return isinstance(getattr(dataloader, "dataset", None), IterableDataset)


def sized_len(dataloader: object) -> int | None:
    """``len(dataloader)``, or None when it has no length."""
    return combined_loader.sized_len(dataloader)


def has_len(dataloader: object) -> bool:
    """Whether ``dataloader`` has a length (a warning when it is 0, or when an iterable dataset
    claims one: with several workers it may count samples twice)."""
    length = sized_len(dataloader)
    if length == 0:
        rank_zero_warn(f"{type(dataloader).__name__} has length 0; expected batches to run")
    if length is not None and has_iterable_dataset(dataloader):
        rank_zero_warn(
            f"{type(dataloader).__name__} of an IterableDataset with __len__: with several "
            "workers the length counts what each worker yields unless they split the data"
        )
    return length is not None


def has_len_all_ranks(
    dataloader: object,
    strategy: Strategy,
    allow_zero_length_dataloader_with_multiple_devices: bool = False,
) -> bool:
    """Whether ``dataloader`` has a length; a RuntimeError when it is empty on this rank but
    not on all (unless allowed), a warning when it is empty on every rank."""
    local_length = sized_len(dataloader)
    if local_length is None:
        return False
    total = int(strategy.reduce(torch.tensor(local_length, device=strategy.root_device), "sum"))
    if total == 0:
        rank_zero_warn(f"{type(dataloader).__name__} has no batches on any rank")
    elif local_length == 0:
        if not allow_zero_length_dataloader_with_multiple_devices:
            raise RuntimeError(
                f"{type(dataloader).__name__} has no batches on rank {strategy.global_rank} but "
                f"{total} across ranks; give every rank data (a DistributedSampler), or pass "
                "allow_zero_length_dataloader_with_multiple_devices=True"
            )
        rank_zero_warn(f"{type(dataloader).__name__} has no batches on some ranks")
    return True


def suggested_max_num_workers(local_world_size: int) -> int:
    """An upper bound for a DataLoader's ``num_workers``: the CPUs this process may use, shared
    by the ``local_world_size`` processes of this machine, less one for each process itself."""
    if local_world_size < 1:
        raise ValueError(
            f"suggested_max_num_workers: local_world_size {local_world_size!r}; expected >= 1 "
            "(the processes on this machine, e.g. the Trainer's devices)"
        )
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, (cpus or 1) // local_world_size - 1)
