"""Total wall time of one 2-rank CPU DDP job: trainkit's launcher vs a hand-written torchrun script.

    python scripts/bench_ddp.py [--repeats 3] [--epochs 5]

Same model (trainkit.demos.autoencoder), same synthetic data, DistributedSampler, Adam, validation
each epoch. trainkit runs with loggers/checkpoints/progress off (like the raw script) and with its
defaults on. Lightning runs too when importable. Medians of interleaved repetitions.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from trainkit.distributed.ports import find_free_port  # noqa: E402

RAW_SCRIPT = textwrap.dedent("""
    import os, sys
    import torch, torch.distributed as dist
    from torch.nn import functional as F
    from torch.nn.parallel import DistributedDataParallel as DDP
    from torch.utils.data import DataLoader, DistributedSampler
    from trainkit.demos.autoencoder import AutoEncoder, SyntheticDataModule

    def main(epochs):
        dist.init_process_group("gloo")
        rank = dist.get_rank()
        torch.manual_seed(42)
        data = SyntheticDataModule(num_samples=4096)
        data.setup("fit")
        train_sampler = DistributedSampler(data.train_set, shuffle=True, seed=42)
        train = DataLoader(data.train_set, batch_size=64, sampler=train_sampler)
        val = DataLoader(data.val_set, batch_size=64, sampler=DistributedSampler(data.val_set, shuffle=False))
        model = DDP(AutoEncoder())
        optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
        for epoch in range(epochs):
            train_sampler.set_epoch(epoch)
            model.train()
            for (x,) in train:
                optimizer.zero_grad(set_to_none=True)
                loss = F.mse_loss(model(x), x)
                loss.backward()
                optimizer.step()
            model.eval()
            with torch.no_grad():
                total = torch.zeros(2)
                for (x,) in val:
                    total += torch.stack([F.mse_loss(model(x), x, reduction="sum") / x.shape[1], torch.tensor(len(x))])
                dist.all_reduce(total)
            if rank == 0:
                print(f"epoch {epoch} val_loss={float(total[0] / total[1]):.4g}", flush=True)
        dist.barrier()
        dist.destroy_process_group()
        os._exit(0)  # same exit as trainkit's ranks: gloo can abort during interpreter finalization

    if __name__ == "__main__":
        main(int(sys.argv[1]))
""")

LIGHTNING_SCRIPT = textwrap.dedent("""
    import sys
    import pytorch_lightning as pl
    import torch
    from torch.nn import functional as F
    from trainkit.demos.autoencoder import SyntheticDataModule

    class AE(pl.LightningModule):
        def __init__(self):
            super().__init__()
            from trainkit.demos.autoencoder import AutoEncoder
            self.net = AutoEncoder()
        def training_step(self, batch, batch_idx):
            return F.mse_loss(self.net(batch[0]), batch[0])
        def validation_step(self, batch, batch_idx):
            self.log("val_loss", F.mse_loss(self.net(batch[0]), batch[0]), sync_dist=True)
        def configure_optimizers(self):
            return torch.optim.Adam(self.parameters(), lr=0.01)

    class Data(pl.LightningDataModule):
        def __init__(self):
            super().__init__()
            self.inner = SyntheticDataModule(num_samples=4096)
        def setup(self, stage):
            self.inner.setup(stage)
        def train_dataloader(self):
            return self.inner.train_dataloader()
        def val_dataloader(self):
            return self.inner.val_dataloader()

    if __name__ == "__main__":
        pl.seed_everything(42)
        trainer = pl.Trainer(accelerator="cpu", devices=2, strategy="ddp", max_epochs=int(sys.argv[1]),
                             logger=False, enable_checkpointing=False, enable_progress_bar=False,
                             enable_model_summary=False, num_sanity_val_steps=0, default_root_dir=sys.argv[2])
        trainer.fit(AE(), Data())
        if torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()  # without it gloo threads abort the interpreter at exit
""")


def run(argv: list[str], cwd: str) -> float:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    start = time.perf_counter()
    subprocess.run(
        argv, cwd=cwd, env=env, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--epochs", type=int, default=5)
    args = parser.parse_args()
    py = sys.executable
    with tempfile.TemporaryDirectory() as cwd:
        raw = Path(cwd) / "raw_ddp.py"
        raw.write_text(RAW_SCRIPT)
        quiet = [
            "--trainer.logger",
            "false",
            "--trainer.enable_checkpointing",
            "false",
            "--trainer.enable_progress_bar",
            "false",
            "--trainer.num_sanity_val_steps",
            "0",
        ]
        base = [
            py,
            "-m",
            "trainkit",
            "fit",
            "-c",
            str(REPO / "configs" / "autoencoder.yaml"),
            "--trainer.devices",
            "2",
            "--trainer.max_epochs",
            str(args.epochs),
            "--trainer.default_root_dir",
            cwd,
        ]
        jobs = {
            "hand-written script under torchrun": lambda: [
                py,
                "-m",
                "torch.distributed.run",
                "--nproc-per-node",
                "2",
                "--master-port",
                str(find_free_port()),
                str(raw),
                str(args.epochs),
            ],
            "trainkit fit --trainer.devices 2 (quiet)": lambda: [*base, *quiet],
            "trainkit fit --trainer.devices 2 (defaults)": lambda: base,
        }
        try:
            import pytorch_lightning  # noqa: F401

            lightning = Path(cwd) / "lightning_ddp.py"
            lightning.write_text(LIGHTNING_SCRIPT)
            jobs["Lightning Trainer(devices=2, ddp)"] = lambda: [
                py,
                str(lightning),
                str(args.epochs),
                cwd,
            ]
        except ImportError:
            pass
        samples: dict[str, list[float]] = {name: [] for name in jobs}
        for _ in range(args.repeats):
            for name, argv in jobs.items():
                samples[name].append(run(argv(), cwd))
    reference = statistics.median(samples["hand-written script under torchrun"])
    print(f"2 gloo ranks on CPU, {args.epochs} epochs, repeats={args.repeats}")
    print(f"{'job':<46} {'median s':>9} {'ratio':>7}")
    for name, values in samples.items():
        median = statistics.median(values)
        print(f"{name:<46} {median:>9.2f} {median / reference:>7.2f}")


if __name__ == "__main__":
    main()
