"""Per-rank memory of ddp, ddp_sharded, fsdp (layers built in __init__, or shard-first in
configure_model) and fsdp + CPU offload on N CPU ranks.

    python scripts/bench_memory.py [--layers 8] [--width 2048] [--ranks 2]

A stack of Linear(width, width) layers (8 x 2048^2 = 33.6M parameters) trained 3 steps with Adam.
On each rank, after training: bytes of parameters, gradients and optimizer state held *locally*
(shards only), measured just before the last optimizer step, and the process's peak RSS; "above
base" is the peak RSS above the same run with a one-layer Linear(8, 8) model (imports, gloo,
the loop), so it is what the model itself costs.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

STRATEGIES = {
    "ddp": {"strategy": "ddp"},
    "ddp_sharded": {"strategy": "ddp_sharded"},
    "fsdp": {"strategy": "fsdp"},
    "fsdp, configure_model": {"strategy": "fsdp", "shard_first": True},
    "fsdp + cpu_offload": {"strategy": "fsdp", "cpu_offload": True},
}


def local_bytes(tensors) -> int:
    total = 0
    for tensor in tensors:
        if tensor is None:
            continue
        tensor = tensor.to_local() if hasattr(tensor, "to_local") else tensor
        total += tensor.numel() * tensor.element_size()
    return total


def train(name: str, layers: int, width: int, out: str, ranks: int) -> None:
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    from trainkit import Callback, Trainer, TrainModule
    from trainkit.strategies import FSDPStrategy

    options = STRATEGIES.get(name, {"strategy": "ddp"})
    if name == "baseline":
        layers, width = 1, 8

    class Stack(TrainModule):
        def __init__(self):
            super().__init__()
            self.layers = None if options.get("shard_first") else self.build()

        def build(self):
            return nn.Sequential(*[nn.Linear(width, width) for _ in range(layers)])

        def configure_model(self):  # shard-first: on the meta device under fsdp
            if self.layers is None:
                self.layers = self.build()

        def training_step(self, batch, batch_idx):
            return self.layers(batch[0]).pow(2).mean()

        def configure_optimizers(self):
            return torch.optim.Adam(self.parameters(), lr=1e-4)

    class Measure(Callback):
        """Just before the last optimizer step: gradients and optimizer state both exist."""

        def on_before_optimizer_step(self, trainer, module, optimizer):
            if trainer.global_step != 2:
                return
            local = getattr(optimizer, "optim", optimizer)
            states = [
                v
                for s in local.state.values()
                for v in s.values()
                if isinstance(v, torch.Tensor) and v.dim()
            ]
            report = {
                "params": local_bytes(module.parameters()),
                "grads": local_bytes(p.grad for p in module.parameters()),
                "optimizer": local_bytes(states),
                "peak_rss": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
            }
            Path(out, f"rank{trainer.global_rank}.json").write_text(json.dumps(report))

    strategy = options["strategy"]
    if strategy == "fsdp":
        strategy = FSDPStrategy(
            auto_wrap_policy=["Linear"], cpu_offload=options.get("cpu_offload", False)
        )
    torch.manual_seed(0)
    data = DataLoader(TensorDataset(torch.randn(96, width)), batch_size=16)
    trainer = Trainer(
        accelerator="cpu",
        devices=ranks,
        strategy=strategy,
        max_steps=3,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        default_root_dir=out,
        callbacks=[Measure()],
    )
    trainer.fit(Stack(), data)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--width", type=int, default=2048)
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--run", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run:
        train(args.run, args.layers, args.width, args.out, args.ranks)
        return
    params = args.layers * (args.width * args.width + args.width)
    print(
        f"{params / 1e6:.1f}M parameters, Adam, {args.ranks} gloo ranks on CPU; MiB per rank "
        "(max over ranks)"
    )
    print(
        f"{'strategy':<22} {'params':>8} {'grads':>8} {'optim':>8} {'sum':>8} {'vs ddp':>7} "
        f"{'peak RSS':>9} {'above base':>10} {'vs ddp':>7}"
    )
    baseline = base_rss = ddp_above = None
    for name in ["baseline", *STRATEGIES]:
        with tempfile.TemporaryDirectory() as out:
            subprocess.run(
                [
                    sys.executable,
                    __file__,
                    "--run",
                    name,
                    "--out",
                    out,
                    "--layers",
                    str(args.layers),
                    "--width",
                    str(args.width),
                    "--ranks",
                    str(args.ranks),
                ],
                check=True,
                env={**os.environ, "PYTHONPATH": str(REPO)},
            )
            ranks = [json.loads(p.read_text()) for p in sorted(Path(out).glob("rank*.json"))]
        worst = {k: max(r[k] for r in ranks) / 2**20 for k in ranks[0]}
        if name == "baseline":
            base_rss = worst["peak_rss"]
            print(f"{name:<22} {'':>44} {base_rss:>9.1f}")
            continue
        total = worst["params"] + worst["grads"] + worst["optimizer"]
        baseline = baseline or total
        above = worst["peak_rss"] - base_rss
        ddp_above = ddp_above or above
        print(
            f"{name:<22} {worst['params']:>8.1f} {worst['grads']:>8.1f} {worst['optimizer']:>8.1f} "
            f"{total:>8.1f} {total / baseline:>6.2f}x {worst['peak_rss']:>9.1f} {above:>10.1f} "
            f"{above / ddp_above:>6.2f}x"
        )


if __name__ == "__main__":
    main()
