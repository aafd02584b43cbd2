"""The Tuner on 2 real gloo ranks (trainkit's launcher re-runs the script per rank): each rank
trains on its own shard, so its losses differ, yet rank 0 decides and every rank ends with the
same learning rate and batch size, and the fit after tuning starts from the untouched weights."""

from __future__ import annotations

import json
import sys

import pytest

from tests.helpers.command_env import cli_env, run_captured

PROGRAM = """
import json, sys
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset
import trainkit as pl
from trainkit.tuner import Tuner

OUT = sys.argv[1]


class Regressor(pl.LightningModule):
    def __init__(self):
        super().__init__()
        self.save_hyperparameters()
        self.lr = 0.01
        self.batch_size = 16
        self.layer = torch.nn.Linear(4, 1)
        self.sizes = []

    def training_step(self, batch, batch_idx):
        x, y = batch
        self.sizes.append(len(x))
        if len(x) > 24:  # every rank runs out of memory above 24 samples a batch
            raise RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return F.mse_loss(self.layer(x), y)

    def train_dataloader(self):
        generator = torch.Generator().manual_seed(3)
        x = torch.randn(256, 4, generator=generator)
        y = x @ torch.tensor([[1.0], [-2.0], [0.5], [3.0]]) + 0.1 * torch.randn(256, 1, generator=generator)
        return DataLoader(TensorDataset(x, y), batch_size=self.batch_size)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.lr)


pl.seed_everything(7)
model = Regressor()
before = [p.detach().clone() for p in model.parameters()]
trainer = pl.Trainer(
    accelerator="cpu", devices=2, strategy="ddp", max_epochs=4, logger=False,
    enable_checkpointing=False, enable_progress_bar=False, default_root_dir=OUT,
)
tuner = Tuner(trainer)
finder = tuner.lr_find(model, min_lr=1e-4, max_lr=1.0, num_training=40)
callbacks_after = list(trainer.callbacks)  # the finder is gone again
size = tuner.scale_batch_size(model, mode="binsearch", margin=0.0)
untouched = all(torch.equal(a, b) for a, b in zip(before, model.parameters()))
trainer.fit(model)
with open(f"{OUT}/rank{trainer.global_rank}.json", "w") as file:
    json.dump({
        "world": trainer.world_size,
        "lr": model.lr,
        "optimizer_lr": trainer.optimizers[0].param_groups[0]["lr"],
        "results": finder.results,
        "size": size,
        "batch_size": model.batch_size,
        "loader_batch_size": trainer.train_dataloader.batch_size,
        "sizes_tried": model.sizes,
        "untouched": untouched,
        "callbacks": [type(c).__name__ for c in callbacks_after],
        "weights": [float(v) for p in model.parameters() for v in p.detach().flatten()],
    }, file)
"""


@pytest.mark.distributed
@pytest.mark.timeout(240)
def test_every_rank_ends_with_rank_zeros_lr_and_batch_size(tmp_path, no_leftovers):
    script = tmp_path / "tune.py"
    script.write_text(PROGRAM)
    proc = run_captured(
        [sys.executable, str(script), str(tmp_path)], cwd=tmp_path, env=cli_env(), timeout=220
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    ranks = [json.loads((tmp_path / f"rank{rank}.json").read_text()) for rank in (0, 1)]
    zero, one = ranks
    assert zero["world"] == one["world"] == 2
    # rank 0's losses are every rank's record of the search, and its suggestion every rank's rate
    assert zero["results"] == one["results"] and len(zero["results"]["lr"]) > 10
    assert zero["lr"] == one["lr"] == zero["optimizer_lr"] == one["optimizer_lr"]
    assert zero["lr"] in zero["results"]["lr"]
    # 24 fits and 25 does not on every rank: the bisection ends at 24 everywhere
    assert zero["size"] == one["size"] == zero["batch_size"] == one["batch_size"] == 24
    assert zero["loader_batch_size"] == one["loader_batch_size"] == 24
    assert zero["sizes_tried"] == one["sizes_tried"]
    assert zero["untouched"] and one["untouched"]
    assert zero["callbacks"] == one["callbacks"] == []
    assert zero["weights"] == one["weights"]
    assert not list(tmp_path.glob(".*.ckpt"))  # the searches' checkpoints are removed
    assert proc.stdout.count("Learning rate set to") == 1  # said by rank 0 only
