"""DataLoader handling: distributed samplers, worker seeding, batch limits."""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence, Sized
from typing import TYPE_CHECKING, Any, cast

import torch
from torch.utils.data import (
    DataLoader,
    DistributedSampler,
    IterableDataset,
    RandomSampler,
    Sampler,
    SequentialSampler,
)

from trainkit import combined_loader
from trainkit.errors import ConfigError
from trainkit.seed import worker_init_fn, workers_seeding_enabled

if TYPE_CHECKING:
    from trainkit.state import RunState

_LOADER_ARGS = (
    "batch_size",
    "num_workers",
    "collate_fn",
    "pin_memory",
    "drop_last",
    "timeout",
    "worker_init_fn",
    "multiprocessing_context",
    "generator",
    "prefetch_factor",
    "persistent_workers",
)


def move_to_device(batch: object, device: torch.device | str | int) -> Any:
    """Move every tensor in a (nested) batch to ``device``, and every object with a ``to``
    method (a batch class of the user's) with that method."""
    if isinstance(batch, torch.Tensor):
        return batch.to(device, non_blocking=True)
    if isinstance(batch, dict):
        return {k: move_to_device(v, device) for k, v in batch.items()}
    if isinstance(batch, tuple) and hasattr(batch, "_fields"):
        return type(batch)(*(move_to_device(v, device) for v in batch))
    if isinstance(batch, list | tuple):
        return type(batch)(move_to_device(v, device) for v in batch)
    if not isinstance(batch, type) and callable(getattr(batch, "to", None)):
        return batch.to(device)  # pyright: ignore[reportAttributeAccessIssue]
    return batch


move_data_to_device = move_to_device  # Lightning's name (trainkit.utilities.move_data_to_device)


class UnpaddedDistributedSampler(DistributedSampler):
    """A DistributedSampler that does not pad: every index of the dataset goes to exactly one
    rank (the first ``len % num_replicas`` ranks get one more), so predictions hold no
    duplicates (as Lightning samples for predict)."""

    def __init__(self, dataset: Sized, **kwargs: Any) -> None:
        super().__init__(dataset, drop_last=False, **kwargs)  # type: ignore[arg-type]
        self.total_size = len(dataset)
        self.num_samples = len(range(self.rank, self.total_size, self.num_replicas))


def prepare_loader(
    loader: object,
    sampler_kwargs: dict[str, int] | None,
    train: bool,
    use_distributed_sampler: bool,
    batch_size: int | None = None,
    unshuffled: bool = False,
    padded: bool = True,
) -> Any:
    """Give ``loader`` a DistributedSampler when distributed (and allowed), a new batch size when
    asked (``batch_size_mode: effective``), and seeded workers; ``unshuffled`` (overfit_batches)
    replaces a shuffling sampler with the dataset's order; ``padded=False`` (predict) gives
    each sample to one rank only, where the padding would repeat some on a second rank."""
    if not isinstance(loader, DataLoader):
        return loader
    sampler = None
    if unshuffled and isinstance(loader.sampler, RandomSampler):
        # a map-style dataset (a RandomSampler draws from its length)
        sampler = SequentialSampler(cast(Sized, loader.dataset))
    if sampler_kwargs and use_distributed_sampler and _needs_sampler(loader):
        shuffle = train and isinstance(loader.sampler, RandomSampler) and not unshuffled
        seed = int(os.environ.get("TRAINKIT_GLOBAL_SEED", 0))
        if padded:
            sampler = DistributedSampler(
                loader.dataset,
                shuffle=shuffle,
                drop_last=train and loader.drop_last,
                seed=seed,
                **sampler_kwargs,
            )
        else:
            dataset = cast(Sized, loader.dataset)  # map-style (_needs_sampler)
            sampler = UnpaddedDistributedSampler(
                dataset, shuffle=shuffle, seed=seed, **sampler_kwargs
            )
    new_batch = (
        batch_size if batch_size not in (None, loader.batch_size) and loader.batch_size else None
    )
    if sampler is not None or new_batch is not None:
        loader = _rebuild(loader, sampler, new_batch)
    if loader.num_workers > 0 and not isinstance(loader.worker_init_fn, WorkerInit):
        user_init = loader.worker_init_fn
        loader.worker_init_fn = WorkerInit(user_init, workers_seeding_enabled() and not user_init)
    return loader


class WorkerInit:
    """A DataLoader worker's start: die with its rank (a stuck worker must not outlive it), seed
    it when seeding workers, then the user's own ``worker_init_fn``."""

    def __init__(self, user_init: Callable[[int], None] | None, seed: bool) -> None:
        self.user_init = user_init
        self.seed = seed

    def __call__(self, worker_id: int) -> None:
        from trainkit.distributed.signals import die_with_parent

        die_with_parent()
        if self.seed:
            worker_init_fn(worker_id)
        if self.user_init is not None:
            self.user_init(worker_id)


def _needs_sampler(loader: DataLoader) -> bool:
    if isinstance(loader.dataset, IterableDataset):
        return False
    if isinstance(loader.sampler, DistributedSampler):
        return False
    return loader.batch_size is not None


def _rebuild(
    loader: DataLoader, sampler: Sampler | Iterable | None, batch_size: int | None
) -> DataLoader:
    """The same DataLoader with another sampler and/or batch size."""
    kwargs = {name: getattr(loader, name) for name in _LOADER_ARGS}
    if kwargs["num_workers"] == 0:
        kwargs.pop("prefetch_factor")
        kwargs["persistent_workers"] = False
    if batch_size is not None:
        kwargs["batch_size"] = batch_size
    if sampler is None:
        sampler = loader.sampler
    return DataLoader(loader.dataset, sampler=sampler, **kwargs)


class IndexRecorder(Sampler[list[int]]):
    """A batch sampler that remembers the dataset indices of every batch it gives, in order
    (``seen[batch_idx]``: workers may draw ahead of the batch being processed)."""

    def __init__(self, batch_sampler: Iterable[list[int]]) -> None:
        self.batch_sampler = batch_sampler
        self.seen: list[list[int]] = []

    def __iter__(self) -> Iterator[list[int]]:
        self.seen = []
        for indices in self.batch_sampler:
            self.seen.append(list(indices))
            yield indices

    def __len__(self) -> int:
        return len(self.batch_sampler)  # type: ignore[arg-type]


def recording_indices(loader: object) -> tuple[Any, IndexRecorder | None]:
    """``loader`` rebuilt to record each batch's dataset indices (a DataLoader with a batch
    sampler), or as it is with None."""
    batch_sampler = getattr(loader, "batch_sampler", None)
    if not isinstance(loader, DataLoader) or batch_sampler is None:
        return loader, None
    recorder = IndexRecorder(batch_sampler)
    kwargs = {name: getattr(loader, name) for name in _LOADER_ARGS}
    for name in ("batch_size", "drop_last"):  # given by the batch sampler
        kwargs.pop(name)
    if kwargs["num_workers"] == 0:
        kwargs.pop("prefetch_factor")
        kwargs["persistent_workers"] = False
    return DataLoader(loader.dataset, batch_sampler=recorder, **kwargs), recorder


def set_sampler_epoch(loader: object, epoch: int) -> None:
    """Call ``set_epoch`` on the loader's sampler(s) so each epoch shuffles differently (on
    each loader's, for loaders read together: those with ``flattened``)."""
    for inner in getattr(loader, "flattened", ()):
        set_sampler_epoch(inner, epoch)
    for holder in (getattr(loader, "sampler", None), getattr(loader, "batch_sampler", None)):
        for candidate in (holder, getattr(holder, "sampler", None)):
            if candidate is not None and hasattr(candidate, "set_epoch"):
                candidate.set_epoch(epoch)
                return


def say_empty_loaders(state: RunState, loop: str, loaders: Sequence[object]) -> None:
    """Lightning's warning for each loader with no batches on any rank, once per loop and
    Trainer call (when the loop loads its loaders); rank 0 says it."""
    if loop in state.said_empty or not loaders:
        return
    state.said_empty.add(loop)
    strategy = state.strategy
    local = [combined_loader.sized_len(loader) for loader in loaders]
    lengths = torch.tensor([1 if n is None else n for n in local], device=strategy.root_device)
    totals = strategy.reduce(lengths, "sum") if strategy.world_size > 1 else lengths
    for loader, total in zip(loaders, totals.tolist()):
        if total == 0 and strategy.is_global_zero:
            warnings.warn(
                f"Total length of `{type(loader).__name__}` across ranks is zero: the {loop} "
                "loop runs none of its batches. Please make sure this was your intention.",
                UserWarning,
                stacklevel=2,
            )


def limited_batches(loader: object, limit: int | float, key: str) -> int | float:
    """How many batches to run from ``loader`` given ``limit_*_batches`` (inf if unsized)."""
    try:  # a sized loader may still have no length (a DataLoader of an IterableDataset raises)
        total: int | float = len(loader) if isinstance(loader, Sized) else math.inf
    except TypeError:
        total = math.inf
    if isinstance(limit, bool) or limit < 0:
        raise ConfigError(
            f"trainer.{key}", limit, "an int >= 0 (batches) or a float in [0, 1] (fraction)"
        )
    if limit == 0:  # 0 or 0.0: none, whatever the loader (or no loader) holds
        return 0
    if isinstance(limit, int):
        return min(total, limit)
    if limit > 1.0:
        raise ConfigError(
            f"trainer.{key}", limit, "a float in [0, 1] or an int count", f"write {int(limit)}"
        )
    if limit == 1.0 or total == math.inf:
        return total
    return int(total * limit)
