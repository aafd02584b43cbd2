"""What the cluster tests launch: the noisy regressor of the reliability tests with a start-up
marker, failures injected per restart, a callback that records where each rank ran, and the
exact regressor of the two-node tests (its weights do not depend on how a batch is split)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import torch
from torch.utils.data import DataLoader, TensorDataset

from tests.helpers.resumable import NoisyRegressor
from trainkit import Callback, DataModule

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


class ExactRegressor(NoisyRegressor):
    """A float64 linear model starting from zero, trained by plain SGD at a power-of-two rate on
    small-integer points (``ExactData``): every sum in a step is exact, so a batch split over any
    number of ranks and nodes ends with the very weights of one process given the whole batch.
    The noisy regressor's step (its faults, ``sleep_s``, ``touch_file``) is kept."""

    def __init__(self, lr: float = 2**-7, **kwargs: Any) -> None:
        super().__init__(lr=lr, **kwargs)
        self.net = torch.nn.Linear(8, 1, dtype=torch.float64)
        torch.nn.init.zeros_(self.net.weight)
        torch.nn.init.zeros_(self.net.bias)

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr)


class ExactData(DataModule):
    """``size`` points with coordinates in -2..2 and integer targets, in a fixed order."""

    def __init__(self, size: int = 64, batch_size: int = 4) -> None:
        super().__init__()
        self.save_hyperparameters()
        generator = torch.Generator().manual_seed(3)
        self.x = torch.randint(-2, 3, (size, 8), generator=generator).to(torch.float64)
        self.y = self.x @ torch.arange(1.0, 9.0, dtype=torch.float64).unsqueeze(1) - 3

    def train_dataloader(self) -> DataLoader:
        dataset = TensorDataset(self.x, self.y)
        return DataLoader(dataset, batch_size=self.hparams.batch_size, shuffle=False)
