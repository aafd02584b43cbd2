"""``isolate_rng``: code inside the block leaves every random generator as it found it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from trainkit.seed import collect_rng_states, restore_rng_states, seed_everything

__all__ = ["isolate_rng", "seed_everything"]


@contextmanager
def isolate_rng(include_cuda: bool = True) -> Iterator[None]:
    """Restore the python, numpy, torch (and, with ``include_cuda``, CUDA) generators on exit."""
    states = collect_rng_states()
    if not include_cuda:
        states.pop("cuda", None)
    try:
        yield
    finally:
        restore_rng_states(states)
