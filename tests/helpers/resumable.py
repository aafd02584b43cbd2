"""A run whose every source of randomness matters: augmentation in the workers, dropout, shuffling,
Adam and a scheduler; resuming it exactly needs every piece of state a checkpoint holds."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset

from trainkit import DataModule, TrainModule


class NoisyPoints(Dataset):
    """Fixed points with fresh random noise added on every read (so worker RNG matters)."""

    def __init__(
        self, count: int, features: int = 8, seed: int = 0, stall_rank: int = -1, stall_after=0
    ) -> None:
        generator = torch.Generator().manual_seed(seed)
        self.x = torch.randn(count, features, generator=generator)
        self.y = self.x.sum(dim=1, keepdim=True)
        self.stall_rank, self.stall_after, self.reads = stall_rank, stall_after, 0

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        self.reads += 1
        if self.reads > self.stall_after and int(os.environ.get("RANK", 0)) == self.stall_rank:
            time.sleep(3600)  # a data loader that never delivers
        return self.x[index] + 0.1 * torch.randn_like(self.x[index]), self.y[index]


class NoisyData(DataModule):
    """Shuffled, augmented training points; plain validation points."""

    def __init__(
        self,
        train_size: int = 48,
        batch_size: int = 4,
        num_workers: int = 0,
        val_size: int = 8,
        stall_rank: int = -1,
        stall_after: int = 0,
    ) -> None:
        """``stall_rank`` hangs forever reading its ``stall_after``-th training point."""
        super().__init__()
        self.save_hyperparameters()

    def train_dataloader(self) -> DataLoader:
        h = self.hparams
        return DataLoader(
            NoisyPoints(h.train_size, stall_rank=h.stall_rank, stall_after=h.stall_after),
            batch_size=h.batch_size,
            shuffle=True,
            num_workers=h.num_workers,
            persistent_workers=False,
        )

    def val_dataloader(self) -> DataLoader:
        h = self.hparams
        return DataLoader(
            NoisyPoints(h.val_size, seed=1), batch_size=h.batch_size, num_workers=h.num_workers
        )


class NoisyRegressor(TrainModule):
    """An MLP with dropout, Adam and a per-step LR decay.

    ``sleep_s`` slows every step (for tests that signal a run mid-training); ``touch_file`` is
    created once training passes ``touch_after_steps`` so those tests know when to act.
    ``fault`` injects a failure on ``fault_rank`` at step ``fault_step``: raise, exit, kill,
    hang (sleep forever) or extra_collective (a collective no other rank calls); the time of the
    fault goes to ``fault_file``. ``ballast_mb`` adds an untrained buffer that makes every
    checkpoint that many MiB bigger (slow to write).
    """

    def __init__(
        self,
        lr: float = 0.01,
        sleep_s: float = 0.0,
        touch_file: str | None = None,
        touch_after_steps: int = 1,
        fault: str | None = None,
        fault_rank: int = 0,
        fault_step: int = 2,
        fault_file: str | None = None,
        ballast_mb: int = 0,
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.net = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Dropout(0.2), nn.Linear(32, 1))
        self.register_buffer("ballast", torch.zeros(ballast_mb * 2**18))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        h = self.hparams
        if h.fault and self.global_rank == h.fault_rank and self.global_step == h.fault_step:
            if h.fault_file:
                Path(h.fault_file).write_text(repr(time.time()))
            inject_fault(h.fault)
        if h.sleep_s:
            time.sleep(h.sleep_s)
        if h.touch_file and self.global_step >= h.touch_after_steps:
            Path(h.touch_file).touch()
        x, y = batch
        loss = F.mse_loss(self(x), y)
        self.log("train_loss", loss)
        self.log("train_loss_mean", loss, on_step=False, on_epoch=True, sync_dist=True)
        return loss

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        x, y = batch
        self.log("val_loss", F.mse_loss(self(x), y), sync_dist=True)

    def configure_optimizers(self) -> Any:
        optimizer = torch.optim.Adam(self.parameters(), lr=self.hparams.lr)
        scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=3, gamma=0.9)
        return {
            "optimizer": optimizer,
            "lr_scheduler": {"scheduler": scheduler, "interval": "step"},
        }


def inject_fault(kind: str) -> None:
    """Fail the calling rank the way ``kind`` names."""
    if kind == "raise":
        raise RuntimeError("injected failure")
    if kind == "exit":
        os._exit(3)
    if kind == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    if kind == "hang":
        time.sleep(3600)
    if kind == "extra_collective":
        import torch.distributed as dist

        dist.all_reduce(torch.ones(3))
        return
    raise ValueError(f"unknown fault {kind!r}")
