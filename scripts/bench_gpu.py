"""GPU throughput (samples/s) of a ResNet-sized CNN on synthetic data: raw loop vs trainkit.

    python scripts/bench_gpu.py [--steps 200] [--batch 128]

For each precision (32, bf16-mixed, 16-mixed) a hand-written loop with torch.autocast (+ GradScaler
for fp16) and trainkit's Trainer train the same model; prints samples/s and trainkit's overhead.
Exits with a message when no CUDA device is present.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from trainkit import Callback, Trainer, TrainModule

DTYPES = {"32": None, "bf16-mixed": torch.bfloat16, "16-mixed": torch.float16}


def block(cin: int, cout: int, stride: int) -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(cin, cout, 3, stride, 1, bias=False),
        nn.BatchNorm2d(cout),
        nn.ReLU(inplace=True),
        nn.Conv2d(cout, cout, 3, 1, 1, bias=False),
        nn.BatchNorm2d(cout),
        nn.ReLU(inplace=True),
    )


def resnet_like() -> nn.Module:
    """~11M parameters, ResNet-18-shaped widths, 64x64 inputs."""
    return nn.Sequential(
        nn.Conv2d(3, 64, 3, 1, 1, bias=False),
        nn.BatchNorm2d(64),
        nn.ReLU(inplace=True),
        block(64, 64, 1),
        block(64, 64, 1),
        block(64, 128, 2),
        block(128, 128, 1),
        block(128, 256, 2),
        block(256, 256, 1),
        block(256, 512, 2),
        block(512, 512, 1),
        nn.AdaptiveAvgPool2d(1),
        nn.Flatten(),
        nn.Linear(512, 100),
    )


def loader(steps: int, batch: int) -> DataLoader:
    x = torch.randn(batch * 8, 3, 64, 64)
    y = torch.randint(0, 100, (batch * 8,))
    data = TensorDataset(
        x.repeat(steps // 8 + 1, 1, 1, 1)[: steps * batch],
        y.repeat(steps // 8 + 1)[: steps * batch],
    )
    return DataLoader(data, batch_size=batch, pin_memory=True)


def raw(data: DataLoader, precision: str) -> float:
    torch.manual_seed(0)
    model = resnet_like().cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    scaler = torch.amp.GradScaler("cuda", enabled=precision == "16-mixed")
    dtype = DTYPES[precision]
    torch.cuda.synchronize()
    start = time.perf_counter()
    for x, y in data:
        x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
        with torch.autocast("cuda", dtype=dtype or torch.float32, enabled=dtype is not None):
            loss = F.cross_entropy(model(x), y)
        opt.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(opt)
        scaler.update()
    torch.cuda.synchronize()
    return len(data.dataset) / (time.perf_counter() - start)


class Net(TrainModule):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.net = resnet_like()

    def training_step(self, batch, batch_idx):
        x, y = batch
        return F.cross_entropy(self.net(x), y)

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.01, momentum=0.9)


class Timer(Callback):
    def on_train_start(self, trainer, module):
        torch.cuda.synchronize()
        self.start = time.perf_counter()

    def on_train_end(self, trainer, module):
        torch.cuda.synchronize()
        self.seconds = time.perf_counter() - self.start


def trainkit_run(data: DataLoader, precision: str) -> float:
    timer = Timer()
    with tempfile.TemporaryDirectory() as root:
        trainer = Trainer(
            accelerator="gpu",
            devices=1,
            precision=precision,
            max_epochs=1,
            logger=False,
            enable_progress_bar=False,
            enable_checkpointing=False,
            num_sanity_val_steps=0,
            default_root_dir=root,
            callbacks=[timer],
        )
        trainer.fit(Net(), data)
    return len(data.dataset) / timer.seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--batch", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("skipped: no CUDA device (run this on a GPU machine)")
        return
    torch.backends.cudnn.benchmark = True
    data = loader(args.steps, args.batch)
    print(
        f"{torch.cuda.get_device_name()} torch={torch.__version__} steps={args.steps} batch={args.batch}"
    )
    print(f"{'precision':<12} {'raw samples/s':>14} {'trainkit samples/s':>19} {'overhead':>9}")
    for precision in DTYPES:
        raw(data, precision), trainkit_run(data, precision)  # warm-up (cudnn autotune, allocator)
        raws = sorted(raw(data, precision) for _ in range(args.repeats))
        tks = sorted(trainkit_run(data, precision) for _ in range(args.repeats))
        r, t = raws[len(raws) // 2], tks[len(tks) // 2]
        print(f"{precision:<12} {r:>14.0f} {t:>19.0f} {100 * (r / t - 1):>8.2f}%")


if __name__ == "__main__":
    main()
