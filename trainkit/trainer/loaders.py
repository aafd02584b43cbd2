"""A stage's DataLoaders made ready for the strategy: distributed samplers, per-rank batches."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from trainkit.combined_loader import CombinedBatches, CombinedLoader
from trainkit.data import prepare_loader
from trainkit.errors import ConfigError
from trainkit.scaling import per_device_batch
from trainkit.strategies import Strategy


def prepare_loaders(
    given: object,
    kind: str,
    strategy: Strategy,
    use_distributed_sampler: bool,
    batch_size_mode: str,
    unshuffled: bool = False,
    accumulate: int = 1,
) -> list[Any]:
    """``given`` (a loader, a list or dict of them, a CombinedLoader, or None) as a list of
    ready loaders; ``kind`` is 'train', 'val', 'test' or 'predict' (train loaders shuffle,
    unless ``unshuffled``, and get the per-rank batch, of which ``accumulate`` make one
    optimizer step). Several training loaders are read
    together (``max_size_cycle``, as Lightning), several evaluation loaders one after another,
    each with its ``dataloader_idx``."""
    sampler_kwargs = strategy.distributed_sampler_kwargs()

    def ready(loader: Any) -> Any:
        batch_size = None
        if kind == "train" and getattr(loader, "batch_size", None):
            batch_size = per_device_batch(
                loader.batch_size, strategy.world_size, batch_size_mode, accumulate
            )
        train = kind == "train"
        return prepare_loader(
            loader,
            sampler_kwargs,
            train,
            use_distributed_sampler,
            batch_size,
            unshuffled and train,
            padded=kind != "predict",
        )

    if given is None:
        return []
    if not isinstance(given, CombinedLoader):
        if not isinstance(given, list | tuple | Mapping):
            return [ready(given)]
        given = CombinedLoader(given, "max_size_cycle" if kind == "train" else "sequential")
    given.flattened = [ready(loader) for loader in given.flattened]
    if given.mode == "sequential":
        if kind == "train":
            raise ConfigError(
                "a training CombinedLoader's mode",
                given.mode,
                "'max_size_cycle', 'max_size' or 'min_size'",
                "sequential reading is for evaluation loaders",
            )
        return list(given.flattened)
    if kind == "predict":
        raise ConfigError(
            "a prediction CombinedLoader's mode",
            given.mode,
            "'sequential'",
            "predict one loader after another: CombinedLoader(loaders, 'sequential')",
        )
    return [CombinedBatches(given)]
