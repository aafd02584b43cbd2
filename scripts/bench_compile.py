"""torch.compile under trainkit against the same compile in a raw PyTorch loop (CPU inductor, or
CUDA when present): first-step (compile) seconds, steady step time, and the speed-up over eager.

    .venv/bin/python scripts/bench_compile.py [--steps 60] [--repeats 5] [--width 512]

Model: 4 residual blocks of LayerNorm -> Linear(width, 4 width) -> GELU -> Linear(4 width, width)
(elementwise work inductor can fuse), batch 64, AdamW. Four variants, each in a fresh interpreter
(so no variant reuses another's compiled code from memory; inductor's on-disk cache is pointed at
a fresh folder per run): raw eager, raw ``torch.compile(model)``, trainkit eager, trainkit with
``Trainer(compile=True)``. "steady" is the median step after the first 10; medians over repeats,
with their range (this shared 2-core machine varies by tens of percent from run to run).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
VARIANTS = ("raw eager", "raw compiled", "trainkit eager", "trainkit compile=True")


def build(width: int):
    """The residual MLP and a deterministic batch stream."""
    import torch
    from torch import nn

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.norm = nn.LayerNorm(width)
            self.up, self.down = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)

        def forward(self, x):
            return x + self.down(nn.functional.gelu(self.up(self.norm(x))))

    torch.manual_seed(0)
    return nn.Sequential(*[Block() for _ in range(4)], nn.Linear(width, 1))


def run_variant(variant: str, steps: int, width: int) -> dict[str, float]:
    """Train ``steps`` steps one way; the seconds of each step (the first includes compiling)."""
    import torch
    from torch.nn import functional as F
    from torch.utils.data import DataLoader, TensorDataset

    device = "cuda" if torch.cuda.is_available() else "cpu"
    generator = torch.Generator().manual_seed(1)
    x = torch.randn(steps * 64, width, generator=generator)
    loader = DataLoader(TensorDataset(x, x.mean(1, keepdim=True)), batch_size=64)
    times: list[float] = []

    def tick() -> None:
        if device == "cuda":
            torch.cuda.synchronize()
        times.append(time.perf_counter())

    if variant.startswith("raw"):
        net = build(width).to(device)
        model = torch.compile(net) if variant == "raw compiled" else net
        optimizer = torch.optim.AdamW(net.parameters(), lr=1e-3)
        tick()
        for inputs, target in loader:
            inputs, target = inputs.to(device), target.to(device)
            optimizer.zero_grad(set_to_none=True)
            F.mse_loss(model(inputs), target).backward()
            optimizer.step()
            tick()
    else:
        sys.path.insert(0, str(REPO))
        from trainkit import Callback, Trainer, TrainModule

        class Net(TrainModule):
            def __init__(self) -> None:
                super().__init__()
                self.net = build(width)

            def forward(self, inputs):
                return self.net(inputs)

            def training_step(self, batch, batch_idx):
                inputs, target = batch
                return F.mse_loss(self(inputs), target)

            def configure_optimizers(self):
                return torch.optim.AdamW(self.parameters(), lr=1e-3)

        class StepClock(Callback):
            def on_train_start(self, trainer, pl_module):
                tick()

            def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
                tick()

        with tempfile.TemporaryDirectory() as root:
            Trainer(
                accelerator="gpu" if device == "cuda" else "cpu",
                devices=1,
                max_epochs=1,
                compile=variant.endswith("compile=True"),
                logger=False,
                enable_checkpointing=False,
                enable_progress_bar=False,
                enable_model_summary=False,
                default_root_dir=root,
                callbacks=[StepClock()],
            ).fit(Net(), loader)
    steps_seconds = [b - a for a, b in itertools.pairwise(times)]
    return {"first": steps_seconds[0], "steady": statistics.median(steps_seconds[10:])}


def in_fresh_interpreter(variant: str, steps: int, width: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as cache:
        env = {**os.environ, "TORCHINDUCTOR_CACHE_DIR": cache, "PYTHONPATH": str(REPO)}
        argv = [sys.executable, __file__, "--one", variant, "--steps", str(steps)]
        out = subprocess.run(
            [*argv, "--width", str(width)], env=env, capture_output=True, text=True, check=False
        )
    if out.returncode != 0:
        raise SystemExit(f"{variant} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--width", type=int, default=512)
    parser.add_argument("--one", choices=VARIANTS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        print(json.dumps(run_variant(args.one, args.steps, args.width)))
        return
    import torch

    samples: dict[str, list[dict[str, float]]] = {name: [] for name in VARIANTS}
    for _ in range(args.repeats):  # interleaved, so a slow minute of the machine hits all
        for name in VARIANTS:
            samples[name].append(in_fresh_interpreter(name, args.steps, args.width))
    device = torch.cuda.get_device_name() if torch.cuda.is_available() else "CPU"
    print(
        f"{time.strftime('%Y-%m-%d')} torch {torch.__version__} python "
        f"{platform.python_version()} {device} cores {os.cpu_count()} width {args.width} "
        f"steps {args.steps} repeats {args.repeats}"
    )
    median = {
        name: {key: statistics.median(s[key] for s in runs) for key in ("first", "steady")}
        for name, runs in samples.items()
    }
    print(
        "| variant | first step (s) | steady step (ms) | range over repeats (ms) | vs raw eager "
        "| vs its raw twin |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for name in VARIANTS:
        twin = "raw compiled" if "compile" in name else "raw eager"
        steady = median[name]["steady"]
        low, high = (f(s["steady"] for s in samples[name]) * 1e3 for f in (min, max))
        print(
            f"| {name} | {median[name]['first']:.2f} | {steady * 1e3:.2f} | {low:.1f}-{high:.1f} "
            f"| {steady / median['raw eager']['steady']:.2f}x "
            f"| {steady / median[twin]['steady']:.2f}x |"
        )


if __name__ == "__main__":
    main()
