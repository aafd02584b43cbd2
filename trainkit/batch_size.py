"""The batch size of a batch, for ``self.log``: the first dimension of its first tensor."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Mapping

from torch import Tensor

from trainkit.errors import MisconfigurationError


def is_dataclass_instance(obj: object) -> bool:
    """Whether ``obj`` is an instance of a dataclass (not the class itself)."""
    return dataclasses.is_dataclass(obj) and not isinstance(obj, type)


def _sizes(batch: object) -> Iterator[int]:
    """The first-dimension size of every tensor in ``batch``, in order (1 for a scalar)."""
    if isinstance(batch, Tensor):
        yield int(batch.shape[0]) if batch.ndim else 1
    elif isinstance(batch, Mapping):
        for value in batch.values():
            yield from _sizes(value)
    elif is_dataclass_instance(batch):
        for item in dataclasses.fields(batch):  # type: ignore[arg-type]
            yield from _sizes(getattr(batch, item.name))
    elif isinstance(batch, Iterable) and not isinstance(batch, str | bytes):
        for item in batch:
            yield from _sizes(item)


def extract_batch_size(batch: object) -> int:
    """The size of the first dimension of the first tensor in ``batch`` (dicts, sequences and
    dataclasses are searched in order)."""
    try:
        return next(_sizes(batch))
    except StopIteration:
        raise MisconfigurationError(
            f"extract_batch_size: no tensor in a batch of type {type(batch).__name__}; "
            "give the size: self.log(..., batch_size=N)"
        ) from None
