"""What the cluster tests launch: the noisy regressor of the reliability tests with a start-up
marker, failures injected per restart, and a callback that records where each rank ran."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from tests.helpers.resumable import NoisyRegressor
from trainkit import Callback

RESTART_VARIABLES = ("TRAINKIT_RESTART_COUNT", "TORCHELASTIC_RESTART_COUNT", "SLURM_RESTART_COUNT")
RANK_VARIABLES = ("RANK", "SLURM_PROCID", "OMPI_COMM_WORLD_RANK")


def this_rank() -> str:
    return next((os.environ[name] for name in RANK_VARIABLES if name in os.environ), "0")


def attempt() -> int:
    """0 on the first run of a job, N after its Nth restart (by any launcher)."""
    return next((int(os.environ[name]) for name in RESTART_VARIABLES if name in os.environ), 0)


class StartupProbe(NoisyRegressor):
    """Touches ``<created_file>.<rank>`` once built: the rank is past start-up's first steps
    (trainkit's CLI is running) but not yet training."""

    def __init__(self, created_file: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if created_file:
            Path(f"{created_file}.{this_rank()}").touch()


class CrashingRegressor(NoisyRegressor):
    """Rank ``crash_rank`` raises at step ``crash_at[n]`` of the job's nth start (0: the first
    run, then one per restart), and never once the list is used up."""

    def __init__(self, crash_at: list[int] | None = None, crash_rank: int = 1, **kwargs: Any):
        super().__init__(**kwargs)
        self.crash_at = list(crash_at or [])
        self.crash_rank = crash_rank

    def training_step(self, batch: Any, batch_idx: int) -> Any:
        run = attempt()
        if (
            run < len(self.crash_at)
            and self.global_step == self.crash_at[run]
            and self.global_rank == self.crash_rank
        ):
            raise RuntimeError(f"injected failure at step {self.global_step}")
        return super().training_step(batch, batch_idx)


class RankRecorder(Callback):
    """Writes ``<folder>/rank<N>.json``: the ranks and rendezvous each process trained with."""

    def __init__(self, folder: str) -> None:
        self.folder = folder

    def on_fit_start(self, trainer: Any, pl_module: Any) -> None:
        record = {
            "global_rank": trainer.global_rank,
            "local_rank": trainer.local_rank,
            "node_rank": trainer.node_rank,
            "world_size": trainer.world_size,
            "master_port": os.environ.get("MASTER_PORT"),
        }
        Path(self.folder).mkdir(parents=True, exist_ok=True)
        Path(self.folder, f"rank{trainer.global_rank}.json").write_text(json.dumps(record))
