"""seed_everything: the same seed gives the same weights and the same batches."""

from __future__ import annotations

import os
import random
from typing import Any

import numpy as np
import torch

SEED_ENV = "TRAINKIT_GLOBAL_SEED"
WORKERS_ENV = "TRAINKIT_SEED_WORKERS"


def seed_everything(seed: int | None = None, workers: bool = True, verbose: bool = True) -> int:
    """Seed python, numpy and torch (all devices); with ``workers``, DataLoader workers too.
    ``verbose``: Lightning's argument, accepted; trainkit logs no message here."""
    if seed is None:
        seed = int(os.environ.get(SEED_ENV, random.SystemRandom().randrange(2**31)))
    seed = int(seed)
    if not 0 <= seed < 2**32:
        from trainkit.errors import ConfigError

        raise ConfigError(
            "seed_everything", seed, "an int in [0, 2**32)", "or true for a random one"
        )
    os.environ[SEED_ENV] = str(seed)
    os.environ[WORKERS_ENV] = "1" if workers else "0"
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)
    return seed


def worker_init_fn(worker_id: int) -> None:
    """Give each DataLoader worker distinct, reproducible python/numpy seeds (rank aware)."""
    rank = int(os.environ.get("RANK", 0))
    base = torch.initial_seed() - worker_id
    seq = np.random.SeedSequence([base, worker_id, rank])
    torch_seed, np_seed, py_seed = seq.generate_state(3, dtype=np.uint64).tolist()
    np.random.seed(np_seed % 2**32)
    random.seed(py_seed)
    torch.manual_seed(torch_seed % 2**63)


def workers_seeding_enabled() -> bool:
    return os.environ.get(WORKERS_ENV) == "1"


def collect_rng_states() -> dict[str, Any]:
    """Every generator's state in this process, as tensors and lists (loadable weights_only)."""
    numpy_state = np.random.get_state()
    assert isinstance(numpy_state, tuple)  # numpy's global RandomState (MT19937): the legacy tuple
    name, keys, pos, has_gauss, gauss = numpy_state
    version, py_state, py_gauss = random.getstate()
    states: dict[str, Any] = {
        "torch": torch.get_rng_state(),
        "numpy": [name, torch.from_numpy(keys.astype(np.int64)), pos, has_gauss, gauss],
        "python": [version, list(py_state), py_gauss],
    }
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        states["cuda"] = torch.cuda.get_rng_state_all()
    return states


def restore_rng_states(states: dict[str, Any]) -> None:
    torch.set_rng_state(states["torch"])
    name, keys, pos, has_gauss, gauss = states["numpy"]
    np.random.set_state((name, keys.numpy().astype(np.uint32), pos, has_gauss, gauss))
    version, py_state, py_gauss = states["python"]
    random.setstate((version, tuple(py_state), py_gauss))
    if "cuda" in states and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(states["cuda"])
