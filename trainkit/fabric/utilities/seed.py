"""``lightning.fabric.utilities.seed`` (what ``lightning.pytorch.seed_everything`` is):
Lightning's ``seed_everything`` signature and defaults over trainkit's seeding, ``reset_seed``,
and ``pl_worker_init_function`` with Lightning's seeds for each DataLoader worker."""

from __future__ import annotations

import logging
import os
import random

import numpy as np
import torch

from trainkit import seed as seeding
from trainkit.utilities.rank_zero import rank_prefixed_message, rank_zero_only, rank_zero_warn

__all__ = ["pl_worker_init_function", "reset_seed", "seed_everything"]

log = logging.getLogger(__name__)
max_seed_value = 2**32 - 1
min_seed_value = 0
LIGHTNING_SEED_ENV = "PL_GLOBAL_SEED"  # read too: a Lightning launcher's seed
MASK64 = (1 << 64) - 1


def seed_everything(seed: int | None = None, workers: bool = False, verbose: bool = True) -> int:
    """Seed python, numpy and torch as ``trainkit.seed_everything``, with Lightning's defaults:
    ``seed=None`` takes the seed set before in this process tree (else 0, with a warning),
    ``workers=False`` leaves DataLoader workers to torch's own seeding."""
    if seed is None:
        found = os.environ.get(seeding.SEED_ENV) or os.environ.get(LIGHTNING_SEED_ENV)
        if found is None:
            seed = 0
            if verbose:
                rank_zero_warn(f"No seed found, seed set to {seed}")
        else:
            try:
                seed = int(found)
            except ValueError:
                raise ValueError(
                    f"seed_everything: the seed in the environment is {found!r}; expected an int"
                ) from None
    seed = int(seed)
    if not min_seed_value <= seed <= max_seed_value:
        raise ValueError(
            f"seed_everything({seed}); expected an int from {min_seed_value} to {max_seed_value}"
        )
    if verbose:
        log.info(rank_prefixed_message(f"Seed set to {seed}", rank_zero_only.rank))
    return seeding.seed_everything(seed, workers=workers)


def reset_seed() -> None:
    """Seed again with what the last ``seed_everything`` set (nothing when none was set)."""
    found = os.environ.get(seeding.SEED_ENV)
    if found is not None:
        seed_everything(int(found), workers=seeding.workers_seeding_enabled(), verbose=False)


def pl_worker_init_function(worker_id: int, rank: int | None = None) -> None:
    """A DataLoader ``worker_init_fn``: seeds torch, python and numpy in each worker from the
    worker's torch seed, its id and the global rank, to Lightning's values."""
    global_rank = rank_zero_only.rank if rank is None else rank
    base_seed = torch.initial_seed() - worker_id
    seeds = _seed_sequence(base_seed, worker_id, global_rank, count=4)
    torch.manual_seed(seeds[0])
    random.seed((seeds[1] << 32) | seeds[2])
    np.random.seed(np.random.SeedSequence([base_seed, worker_id, global_rank]).generate_state(4))


def _seed_sequence(base_seed: int, worker_id: int, global_rank: int, count: int) -> list[int]:
    """``count`` 64-bit seeds: the three numbers packed into one, mixed by MurmurHash3's
    finalizer, then stepped by Knuth's linear congruential generator."""
    state = (base_seed << 32) | (worker_id << 16) | global_rank
    for multiplier in (0xFF51AFD7ED558CCD, 0xC4CEB9FE1A85EC53):
        state ^= state >> 33
        state = (state * multiplier) & MASK64
    state ^= state >> 33
    seeds = []
    for _ in range(count):
        state = (state * 6364136223846793005 + 1) & MASK64
        seeds.append(state)
    return seeds
