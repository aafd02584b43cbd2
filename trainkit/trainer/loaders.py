"""A stage's DataLoaders made ready for the strategy: distributed samplers, per-rank batches."""

from __future__ import annotations

from typing import Any

from trainkit.data import as_loader_list, prepare_loader
from trainkit.scaling import per_device_batch
from trainkit.strategies import Strategy


def prepare_loaders(
    given: object,
    kind: str,
    strategy: Strategy,
    use_distributed_sampler: bool,
    batch_size_mode: str,
    unshuffled: bool = False,
) -> list[Any]:
    """``given`` (a loader, a list or dict of them, or None) as a list of ready loaders; ``kind``
    is 'train', 'val', 'test' or 'predict' (train loaders shuffle, unless ``unshuffled``, and get
    the per-rank batch)."""
    sampler_kwargs = strategy.distributed_sampler_kwargs()
    prepared = []
    for loader in as_loader_list(given):
        batch_size = None
        if kind == "train" and getattr(loader, "batch_size", None):
            batch_size = per_device_batch(loader.batch_size, strategy.world_size, batch_size_mode)
        prepared.append(
            prepare_loader(
                loader,
                sampler_kwargs,
                kind == "train",
                use_distributed_sampler,
                batch_size,
                unshuffled and kind == "train",
            )
        )
    return prepared
