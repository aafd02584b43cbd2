"""``lightning.fabric.utilities.data``: ``AttributeDict`` and what a loader is made of."""

from trainkit.hparams import AttributeDict
from trainkit.utilities.data import (
    has_iterable_dataset,
    has_len,
    sized_len,
    suggested_max_num_workers,
)

__all__ = [
    "AttributeDict",
    "has_iterable_dataset",
    "has_len",
    "sized_len",
    "suggested_max_num_workers",
]
