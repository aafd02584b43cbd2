"""Per-step overhead of trainkit's training loop against a hand-written PyTorch loop.

    python scripts/bench_overhead.py [--steps 800] [--repeats 7]

A tiny MLP (32->64->1, batch 32, SGD, one thread) is trained by (a) a raw loop, (b) trainkit with
logger/progress bar/checkpointing off, (c) trainkit with one self.log per step and TensorBoard + CSV
loggers + progress bar on, (d) Lightning when importable. Runs are interleaved; medians reported.
"loop" times only the batches (train start to train end); "fit" includes setup.

    python scripts/bench_overhead.py --count-calls [--steps 200]

counts instead the Python function calls per training step (sys.setprofile), a number that does
not depend on the machine's load: the raw loop's, and trainkit's with and without logging.
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import tempfile
import time
from contextlib import redirect_stdout

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[1]))

from trainkit import Callback, CSVLogger, TensorBoardLogger, Trainer, TrainModule


def make_loader(steps: int) -> DataLoader:
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(steps * 32, 32, generator=generator)
    return DataLoader(TensorDataset(x, x.sum(1, keepdim=True)), batch_size=32)


def make_net() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1))


def raw(loader: DataLoader) -> tuple[float, float]:
    start = time.perf_counter()
    net = make_net()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.01)
    loop_start = time.perf_counter()
    for x, y in loader:
        optimizer.zero_grad(set_to_none=True)
        loss = F.mse_loss(net(x), y)
        loss.backward()
        optimizer.step()
    end = time.perf_counter()
    return end - loop_start, end - start


class Net(TrainModule):
    def __init__(self, log: bool = False) -> None:
        super().__init__()
        self.net = make_net()
        self.log_loss = log

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.mse_loss(self.net(x), y)
        if self.log_loss:
            self.log("loss", loss)
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01)


class LoopTimer(Callback):
    """Times train start to train end; overrides no per-step hook, so it costs nothing per step."""

    def on_train_start(self, trainer, module):
        self.start = time.perf_counter()

    def on_train_end(self, trainer, module):
        self.seconds = time.perf_counter() - self.start


def trainkit_run(
    loader: DataLoader, logged: bool, timer: LoopTimer | None = None
) -> tuple[float, float]:
    """One fit of ``Net`` (``logged``: self.log, loggers and progress bar on); (loop, fit) s."""
    timer = timer or LoopTimer()
    with tempfile.TemporaryDirectory() as root, redirect_stdout(io.StringIO()):
        start = time.perf_counter()
        trainer = Trainer(
            accelerator="cpu",
            devices=1,
            max_epochs=1,
            num_sanity_val_steps=0,
            default_root_dir=root,
            logger=[TensorBoardLogger(), CSVLogger()] if logged else False,
            enable_progress_bar=logged,
            enable_checkpointing=False,
            callbacks=[timer],
        )
        trainer.fit(Net(log=logged), loader)
        total = time.perf_counter() - start
    return getattr(timer, "seconds", 0.0), total


def lightning_run(loader: DataLoader) -> tuple[float, float] | None:
    try:
        import pytorch_lightning as pl
    except ImportError:
        return None

    class PLNet(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.net = make_net()

        def training_step(self, batch, batch_idx):
            x, y = batch
            return F.mse_loss(self.net(x), y)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

    class PLTimer(pl.Callback):
        def on_train_start(self, trainer, module):
            self.start = time.perf_counter()

        def on_train_end(self, trainer, module):
            self.seconds = time.perf_counter() - self.start

    timer = PLTimer()
    with tempfile.TemporaryDirectory() as root:
        start = time.perf_counter()
        trainer = pl.Trainer(
            accelerator="cpu",
            devices=1,
            max_epochs=1,
            logger=False,
            enable_progress_bar=False,
            enable_checkpointing=False,
            enable_model_summary=False,
            num_sanity_val_steps=0,
            default_root_dir=root,
            callbacks=[timer],
        )
        trainer.fit(PLNet(), loader)
        total = time.perf_counter() - start
    return timer.seconds, total


class CallCounter:
    """Counts Python function calls (profile 'call' events) while installed."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, frame, event, arg) -> None:
        if event == "call":
            self.calls += 1


class CountingTimer(LoopTimer):
    """Counts the Python calls of the training loop (train start to train end)."""

    def __init__(self) -> None:
        self.counter = CallCounter()

    def on_train_start(self, trainer, module):
        sys.setprofile(self.counter)

    def on_train_end(self, trainer, module):
        sys.setprofile(None)


def count_calls(steps: int) -> None:
    loader = make_loader(steps)
    counter = CallCounter()
    net = make_net()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.01)
    sys.setprofile(counter)
    for x, y in loader:
        optimizer.zero_grad(set_to_none=True)
        loss = F.mse_loss(net(x), y)
        loss.backward()
        optimizer.step()
    sys.setprofile(None)
    rows = [("(a) raw PyTorch loop", counter.calls)]
    for name, logged in (
        ("(b) trainkit, no logger/bar/ckpt", False),
        ("(c) trainkit, self.log + loggers + bar", True),
    ):
        timer = CountingTimer()
        trainkit_run(loader, logged, timer)
        rows.append((name, timer.counter.calls))
    print(f"steps={steps} torch={torch.__version__}  Python calls per training step")
    raw_calls = rows[0][1] / steps
    for name, calls in rows:
        per_step = calls / steps
        print(f"{name:<42} {per_step:8.1f}  +{per_step - raw_calls:6.1f} over raw")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=800)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--count-calls", action="store_true", help="count calls, not time")
    args = parser.parse_args()
    torch.set_num_threads(1)
    if args.count_calls:
        count_calls(args.steps)
        return
    loader = make_loader(args.steps)
    runners = {
        "(a) raw PyTorch loop": lambda: raw(loader),
        "(b) trainkit, no logger/bar/ckpt": lambda: trainkit_run(loader, logged=False),
        "(c) trainkit, self.log + loggers + bar": lambda: trainkit_run(loader, logged=True),
    }
    if lightning_run(loader) is not None:
        runners["(d) Lightning, no logger/bar/ckpt"] = lambda: lightning_run(loader)
    for runner in runners.values():  # warm up imports and allocator
        runner()
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in runners}
    for _ in range(args.repeats):
        for name, runner in runners.items():
            samples[name].append(runner())
    raw_loop = statistics.median(s[0] for s in samples["(a) raw PyTorch loop"])
    raw_fit = statistics.median(s[1] for s in samples["(a) raw PyTorch loop"])
    print(f"steps={args.steps} repeats={args.repeats} threads=1 torch={torch.__version__}")
    print(
        f"{'runner':<42} {'loop us/step':>12} {'over raw':>9} {'ratio':>6} {'fit us/step':>12} {'ratio':>6}"
    )
    for name, values in samples.items():
        loop = statistics.median(v[0] for v in values)
        fit = statistics.median(v[1] for v in values)
        per_step, over = 1e6 * loop / args.steps, 1e6 * (loop - raw_loop) / args.steps
        print(
            f"{name:<42} {per_step:>12.1f} {over:>+9.1f} {loop / raw_loop:>6.3f} "
            f"{1e6 * fit / args.steps:>12.1f} {fit / raw_fit:>6.3f}"
        )


if __name__ == "__main__":
    main()
