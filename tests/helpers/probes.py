"""Models that report what each rank saw, for the multi-process tests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch.utils.data import DataLoader, Dataset

from trainkit import Callback, DataModule
from trainkit.demos.autoencoder import AutoEncoder


class IndexedPoints(Dataset):
    """Synthetic points that also return their index, so samplers can be checked."""

    def __init__(self, count: int, features: int = 32, seed: int = 0) -> None:
        self.points = torch.randn(count, features, generator=torch.Generator().manual_seed(seed))

    def __len__(self) -> int:
        return len(self.points)

    def __getitem__(self, index: int) -> tuple[torch.Tensor, int]:
        return self.points[index], index


class IndexedData(DataModule):
    """Train/val sets of indexed points."""

    def __init__(
        self, train_size: int = 64, val_size: int = 16, batch_size: int = 8, shuffle: bool = True
    ) -> None:
        super().__init__()
        self.save_hyperparameters()

    def train_dataloader(self) -> DataLoader:
        h = self.hparams
        return DataLoader(IndexedPoints(h.train_size), batch_size=h.batch_size, shuffle=h.shuffle)

    def val_dataloader(self) -> DataLoader:
        h = self.hparams
        return DataLoader(IndexedPoints(h.val_size, seed=1), batch_size=h.batch_size)


class RankProbe(AutoEncoder):
    """Records seen indices per epoch, logs rank-dependent values, dumps everything per rank."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.seen: dict[str, list[int]] = {}

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, index = batch
        self.seen.setdefault(f"train{self.current_epoch}", []).extend(index.tolist())
        value = torch.tensor(float(self.global_rank + 1))
        for fx in ("mean", "sum"):  # on_step and on_epoch: the step synced, the epoch once
            self.log(f"train_rank_{fx}", value, sync_dist=True, reduce_fx=fx, on_epoch=True)
        return super().training_step([x], batch_idx)

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        _, index = batch
        if not self.trainer.sanity_checking:
            self.seen.setdefault(f"val{self.current_epoch}", []).extend(index.tolist())
        value = torch.tensor(float(self.global_rank + 1))
        for fx in ("mean", "sum", "max", "min"):
            self.log(f"rank_{fx}", value, sync_dist=True, reduce_fx=fx)
        self.log("rank_unsynced", value)

    def on_fit_end(self) -> None:
        trainer = self.trainer
        torch.save(
            {
                "seen": self.seen,
                "state_dict": {k: v.detach().clone() for k, v in self.state_dict().items()},
                "metrics": {k: float(v) for k, v in trainer.callback_metrics.items()},
                "world_size": trainer.world_size,
                "log_dir": trainer.log_dir,
                "threads": torch.get_num_threads(),
            },
            Path(trainer.default_root_dir) / f"probe_rank{self.global_rank}.pt",
        )


class NodeBatchProbe(AutoEncoder):
    """Computes the loss in training_step_end over everything the node's devices returned."""

    def training_step(self, batch: Any, batch_idx: int) -> dict[str, torch.Tensor]:
        x = batch[0]
        return {"recon": self(x), "x": x}

    def training_step_end(self, outputs: dict[str, torch.Tensor]) -> torch.Tensor:
        if self.global_step == 0:
            print(f"node {self.global_rank} step_end batch {len(outputs['x'])}", flush=True)
        loss = torch.nn.functional.mse_loss(outputs["recon"], outputs["x"])
        self.log("train_loss", loss)
        return loss


def tensor_bytes(tree: Any) -> int:
    """Bytes of the tensors in nested dicts/lists (of a sharded tensor, this rank's part)."""
    if isinstance(tree, torch.Tensor):
        tensor = tree.to_local() if hasattr(tree, "to_local") else tree
        return tensor.numel() * tensor.element_size()
    if isinstance(tree, dict):
        return sum(tensor_bytes(value) for value in tree.values())
    if isinstance(tree, list | tuple):
        return sum(tensor_bytes(value) for value in tree)
    return 0


class OptimizerStateBytes(Callback):
    """Writes how many bytes of optimizer state this rank holds locally (shards only), and, on
    a resume, the bytes of optimizer state the checkpoint it read held in memory (read before
    the optimizers load it)."""

    def on_load_checkpoint(self, trainer: Any, module: Any, checkpoint: dict) -> None:
        read = tensor_bytes(checkpoint.get("optimizer_states"))
        path = Path(trainer.default_root_dir) / f"loaded_rank{trainer.global_rank}.txt"
        path.write_text(str(read))

    def on_train_end(self, trainer: Any, module: Any) -> None:
        total = 0
        for optimizer in trainer.optimizers:
            # fairscale OSS keeps its shard in .optim, DeepSpeed's ZeRO optimizer in .optimizer
            local = getattr(optimizer, "optim", None) or getattr(optimizer, "optimizer", optimizer)
            for state in local.state.values():
                for value in state.values():
                    if isinstance(value, torch.Tensor):
                        tensor = value.to_local() if hasattr(value, "to_local") else value
                        total += tensor.numel() * tensor.element_size()
        path = Path(trainer.default_root_dir) / f"optstate_rank{trainer.global_rank}.txt"
        path.write_text(str(total))
