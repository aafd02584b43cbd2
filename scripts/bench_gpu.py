"""Training throughput on one GPU: the same model, data and optimizer under a hand-written loop,
trainkit's Trainer and Lightning's Trainer, in one run on the same device.

    python scripts/bench_gpu.py [--json PATH] [--budget-s 150] [--repeats 5] [--only cnn,mlp]
    python scripts/bench_gpu.py --cpu-smoke   # tiny sizes on the CPU: every code path, no GPU

Sections (each loop starts from the same seed, the same batches and the same optimizer):
  mlp   a tiny MLP at batch 64, where the per-step overhead dominates: microseconds per step
        over the hand-written loop (trainkit also with nonfinite_loss='ignore': no sync a step)
  cnn   a ResNet-18 (11.2M parameters, 128x128 inputs, 100 classes) at batch 256 with its batches
        already on the GPU: precision 32, bf16-mixed and 16-mixed (GradScaler); trainkit also
        with nonfinite_loss='ignore' at 32 and bf16-mixed (what its loss check's wait costs)
  gpt   a GPT of 25.5M parameters (6 layers, width 512, vocabulary 12288), sequences of 512,
        batch 16, bf16-mixed: eager, then torch.compile (the compile time is the warm-up's)
  data  the CNN at bf16-mixed fed by a DataLoader over CPU samples with pinned memory,
        non_blocking copies and 8 workers (each loop), and by a plain one (no pinning, no
        workers; raw and trainkit): against the GPU-resident batches of the cnn section

Every run takes W warm-up steps (untimed: cuDNN autotuning, compilation, the allocator's growth,
DataLoader workers starting), then R windows of K steps, each timed between two CUDA
synchronizations; the tables show the median window and the spread (max-min over the median).
Runs go in the order mlp, cnn, gpt (eager, then compiled), data, and none starts after
--budget-s: what is left is listed as skipped. The results file is rewritten after every run.
Results go to --json (default $OUT/bench_gpu.json, else gpu_check_out/bench_gpu.json).
Without a CUDA device only --cpu-smoke measures anything; the GPU sections say they skipped.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import io
import json
import logging
import os
import platform
import statistics
import sys
import tempfile
import time
import traceback
import warnings
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, Dataset

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import trainkit

DTYPES: dict[str, torch.dtype | None] = {
    "32": None,
    "bf16-mixed": torch.bfloat16,
    "16-mixed": torch.float16,
}
LIGHTNING_PRECISION = {"32": "32-true", "bf16-mixed": "bf16-mixed", "16-mixed": "16-mixed"}


# ---- models ---------------------------------------------------------------------------------------
class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.shortcut = nn.Identity()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(
                nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout)
            )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(out)) + self.shortcut(x))


class ResNet18(nn.Module):
    """ResNet-18's layout (two basic blocks per stage); ``widths`` shrink it for the smoke run."""

    def __init__(self, classes: int = 100, widths: tuple[int, ...] = (64, 128, 256, 512)) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, widths[0], 7, 2, 3, bias=False),
            nn.BatchNorm2d(widths[0]),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(3, 2, 1),
        )
        blocks, cin = [], widths[0]
        for stage, width in enumerate(widths):
            stride = 1 if stage == 0 else 2
            blocks += [BasicBlock(cin, width, stride), BasicBlock(width, width, 1)]
            cin = width
        self.blocks = nn.Sequential(*blocks)
        self.head = nn.Linear(cin, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.flatten(F.adaptive_avg_pool2d(self.blocks(self.stem(x)), 1), 1))


class Block(nn.Module):
    """A pre-norm transformer block with causal attention."""

    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(width), nn.LayerNorm(width)
        self.qkv, self.proj = nn.Linear(width, 3 * width), nn.Linear(width, width)
        self.fc, self.out = nn.Linear(width, 4 * width), nn.Linear(4 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = (
            part.view(b, t, self.heads, c // self.heads).transpose(1, 2)
            for part in self.qkv(self.ln1(x)).split(c, dim=2)
        )
        attended = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(attended.transpose(1, 2).reshape(b, t, c))
        return x + self.out(F.gelu(self.fc(self.ln2(x))))


class GPT(nn.Module):
    """A GPT-2-shaped decoder; the output head shares the token embedding."""

    def __init__(self, vocab: int, seq: int, width: int, layers: int, heads: int) -> None:
        super().__init__()
        self.tokens, self.positions = nn.Embedding(vocab, width), nn.Embedding(seq, width)
        self.blocks = nn.Sequential(*(Block(width, heads) for _ in range(layers)))
        self.ln = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)
        self.head.weight = self.tokens.weight

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        where = torch.arange(idx.shape[1], device=idx.device)
        return self.head(self.ln(self.blocks(self.tokens(idx) + self.positions(where))))


def mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 1))


def token_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.flatten(0, 1).float(), targets.flatten())


# ---- workloads and feeds ------------------------------------------------------------------------
@dataclass
class Workload:
    """A model, its loss and optimizer, and a few distinct (x, y) batches on the CPU."""

    name: str
    make_model: Callable[[], nn.Module]
    criterion: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    make_optimizer: Callable[[Any], torch.optim.Optimizer]
    batch_size: int
    inputs: torch.Tensor  # every sample of the distinct batches, on the CPU
    targets: torch.Tensor
    warmup: int
    window: int
    unit: str = "samples"  # what samples/s counts
    per_sample: int = 1  # e.g. tokens per sample, for a second rate

    @property
    def parameters(self) -> int:
        return sum(p.numel() for p in self.make_model().parameters())


def sgd(params: Any) -> torch.optim.Optimizer:
    return torch.optim.SGD(params, lr=0.01, momentum=0.9)


def adamw(params: Any) -> torch.optim.Optimizer:
    return torch.optim.AdamW(params, lr=3e-4, weight_decay=0.1)


def workloads(smoke: bool, window: int) -> dict[str, Workload]:
    g = torch.Generator().manual_seed(0)
    if smoke:
        cnn_batch, side, widths, distinct = 8, 32, (8, 16, 32, 64), 2
        vocab, seq, width, layers, heads, gpt_batch = 256, 32, 64, 2, 4, 4
        warm, mlp_warm, mlp_window = 2, 5, 10
    else:
        cnn_batch, side, widths, distinct = 256, 128, (64, 128, 256, 512), 4
        vocab, seq, width, layers, heads, gpt_batch = 12288, 512, 512, 6, 8, 16
        warm, mlp_warm, mlp_window = 5, 50, 100
    images = torch.randn(cnn_batch * distinct, 3, side, side, generator=g)
    tokens = torch.randint(0, vocab, (gpt_batch * distinct, seq + 1), generator=g)
    points = torch.randn(64 * 8, 32, generator=g)
    return {
        "mlp": Workload(
            "mlp",
            mlp,
            F.mse_loss,
            sgd,
            64,
            points,
            points.sum(1, keepdim=True),
            mlp_warm,
            mlp_window * (1 if smoke else max(1, window // 10)),
        ),
        "cnn": Workload(
            "cnn",
            lambda: ResNet18(100, widths),
            F.cross_entropy,
            sgd,
            cnn_batch,
            images,
            torch.randint(0, 100, (len(images),), generator=g),
            warm,
            window,
        ),
        "gpt": Workload(
            "gpt",
            lambda: GPT(vocab, seq, width, layers, heads),
            token_loss,
            adamw,
            gpt_batch,
            tokens[:, :-1].contiguous(),
            tokens[:, 1:].contiguous(),
            warm,
            window,
            unit="sequences",
            per_sample=seq,
        ),
    }


class Batches(Dataset):
    """Whole batches, cycled: a DataLoader with ``batch_size=None`` hands them out as they are
    (on the GPU for the GPU-resident feed)."""

    def __init__(self, inputs: torch.Tensor, targets: torch.Tensor, size: int, length: int):
        self.x, self.y = inputs.split(size), targets.split(size)
        self.length = length

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.x[index % len(self.x)], self.y[index % len(self.y)]


class Samples(Dataset):
    """Single samples, cycled: the DataLoader collates them into batches (the usual path)."""

    def __init__(self, inputs: torch.Tensor, targets: torch.Tensor, length: int) -> None:
        self.x, self.y, self.length = inputs, targets, length

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> tuple[torch.Tensor, torch.Tensor]:
        return self.x[index % len(self.x)], self.y[index % len(self.y)]


def make_loader(work: Workload, feed: str, steps: int, device: torch.device, workers: int):
    """``resident``: the batches already on ``device``; ``pinned``: per-sample loading with
    pinned memory and ``workers`` processes; ``plain``: per-sample, no pinning, no workers."""
    if feed == "resident":
        data = Batches(work.inputs.to(device), work.targets.to(device), work.batch_size, steps)
        return DataLoader(data, batch_size=None)
    samples = Samples(work.inputs, work.targets, steps * work.batch_size)
    if feed == "pinned":
        return DataLoader(
            samples,
            batch_size=work.batch_size,
            pin_memory=device.type == "cuda",
            num_workers=workers,
            prefetch_factor=4 if workers else None,
        )
    return DataLoader(samples, batch_size=work.batch_size)


# ---- timing -------------------------------------------------------------------------------------
class Clock:
    """Timestamps after the warm-up and after every window of steps, each after a sync."""

    def __init__(self, warmup: int, window: int, repeats: int, device: torch.device) -> None:
        self.warmup, self.window, self.repeats = warmup, window, repeats
        self.device = device
        self.start = time.perf_counter()
        self.stamps: list[float] = []

    @property
    def steps(self) -> int:
        return self.warmup + self.window * self.repeats

    def sync(self) -> None:
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)

    def step_done(self, done: int) -> None:
        if done >= self.warmup and (done - self.warmup) % self.window == 0:
            self.sync()
            self.stamps.append(time.perf_counter())

    def windows(self) -> list[float]:
        if len(self.stamps) != self.repeats + 1:
            raise RuntimeError(f"timed {len(self.stamps) - 1} of {self.repeats} windows")
        return [b - a for a, b in zip(self.stamps, self.stamps[1:])]


def moved(batch: Any, device: torch.device) -> Any:
    return [t.to(device, non_blocking=True) for t in batch]


def raw_loop(work: Workload, precision: str, loader: DataLoader, clock: Clock, backend: str | None):
    """The hand-written loop: autocast, GradScaler for fp16, zero_grad(set_to_none);
    ``backend``: torch.compile's (None: eager)."""
    device = clock.device
    torch.manual_seed(0)
    model = work.make_model().to(device)
    step_model: Callable[[torch.Tensor], torch.Tensor] = model
    if backend:
        step_model = torch.compile(model, backend=backend)
    optimizer = work.make_optimizer(model.parameters())
    scaler = torch.amp.GradScaler(device.type, enabled=precision == "16-mixed")
    dtype = DTYPES[precision]
    model.train()
    for done, batch in enumerate(loader, start=1):
        x, y = moved(batch, device)
        with torch.autocast(device.type, dtype=dtype or torch.float32, enabled=dtype is not None):
            loss = work.criterion(step_model(x), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)
        clock.step_done(done)
        if done == clock.steps:
            break


def module_class(base: type) -> type:
    """A trainkit or Lightning module (``base``) around a workload's model and loss."""

    class Wrapped(base):
        def __init__(self, work: Workload) -> None:
            super().__init__()
            torch.manual_seed(0)
            self.net = work.make_model()
            self.criterion, self.make_optimizer = work.criterion, work.make_optimizer

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.net(x)

        def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
            x, y = batch
            return self.criterion(self(x), y)

        def configure_optimizers(self) -> torch.optim.Optimizer:
            return self.make_optimizer(self.parameters())

    return Wrapped


def callback_class(base: type) -> type:
    class Timing(base):
        def __init__(self, clock: Clock) -> None:
            super().__init__()
            self.clock = clock

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            self.clock.step_done(batch_idx + 1)

    return Timing


def trainer_options(clock: Clock, precision: str, root: str) -> dict[str, Any]:
    return dict(
        accelerator="gpu" if clock.device.type == "cuda" else "cpu",
        devices=1,
        precision=precision,
        max_steps=clock.steps,
        max_epochs=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        default_root_dir=root,
        benchmark=True if clock.device.type == "cuda" else None,
    )


def trainkit_loop(
    work: Workload,
    precision: str,
    loader: DataLoader,
    clock: Clock,
    backend: str | None,
    nonfinite_loss: str = "stop",
):
    module = module_class(trainkit.TrainModule)(work)
    timing = callback_class(trainkit.Callback)(clock)
    with tempfile.TemporaryDirectory() as root:
        trainer = trainkit.Trainer(
            **trainer_options(clock, precision, root),
            callbacks=[timing],
            compile={"backend": backend} if backend else False,
            nonfinite_loss=nonfinite_loss,
        )
        trainer.fit(module, loader)


def lightning_loop(
    work: Workload, precision: str, loader: DataLoader, clock: Clock, backend: str | None
):
    import lightning

    module = module_class(lightning.LightningModule)(work)
    timing = callback_class(lightning.Callback)(clock)
    with tempfile.TemporaryDirectory() as root:
        options = trainer_options(clock, LIGHTNING_PRECISION[precision], root)
        trainer = lightning.Trainer(**options, callbacks=[timing])
        trainer.fit(torch.compile(module, backend=backend) if backend else module, loader)


LOOPS: dict[str, Callable[..., None]] = {
    "raw": raw_loop,
    "trainkit": trainkit_loop,
    "trainkit (nonfinite_loss=ignore)": lambda *a: trainkit_loop(*a, nonfinite_loss="ignore"),
    "lightning": lightning_loop,
}


# ---- cells --------------------------------------------------------------------------------------
@dataclass
class Cell:
    section: str
    workload: str
    loop: str
    precision: str
    feed: str = "resident"
    compiled: bool = False
    status: str = "pending"  # ok | skipped | error
    reason: str = ""
    batch_size: int = 0
    warmup_steps: int = 0
    window_steps: int = 0
    windows_s: list[float] = field(default_factory=list)
    warmup_s: float = 0.0
    samples_per_s: dict[str, float] = field(default_factory=dict)  # median, min, max, spread
    us_per_step: float = 0.0
    unit: str = "samples"
    per_sample: int = 1

    @property
    def label(self) -> str:
        extra = [self.precision]
        if self.compiled:
            extra.append("compiled")
        if self.feed != "resident":
            extra.append(self.feed)
        return f"{self.workload} {' '.join(extra)}"


def measure(
    cell: Cell, work: Workload, device: torch.device, repeats: int, workers: int, backend: str
) -> None:
    clock = Clock(work.warmup * (3 if cell.compiled else 1), work.window, repeats, device)
    loader = make_loader(work, cell.feed, clock.steps, device, workers)
    quiet = io.StringIO()
    try:
        with contextlib.redirect_stdout(quiet), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            clock.start = time.perf_counter()
            compiler = backend if cell.compiled else None
            LOOPS[cell.loop](work, cell.precision, loader, clock, compiler)
        windows = clock.windows()
    except Exception as error:  # one cell's failure is reported, the others still run
        cell.status, cell.reason = "error", f"{type(error).__name__}: {error}"
        print(traceback.format_exc(), quiet.getvalue()[-2000:], file=sys.stderr)
        return
    finally:
        del loader
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()
    rates = [work.window * work.batch_size / seconds for seconds in windows]
    median = statistics.median(rates)
    cell.status = "ok"
    cell.batch_size, cell.warmup_steps, cell.window_steps = (
        work.batch_size,
        clock.warmup,
        work.window,
    )
    cell.windows_s, cell.warmup_s = windows, clock.stamps[0] - clock.start
    cell.samples_per_s = {
        "median": median,
        "min": min(rates),
        "max": max(rates),
        "spread": (max(rates) - min(rates)) / median,
    }
    cell.us_per_step = 1e6 * statistics.median(windows) / work.window
    cell.unit, cell.per_sample = work.unit, work.per_sample


def plan(only: set[str], has_cuda: bool) -> list[Cell]:
    loops = ["raw", "trainkit", "lightning"]
    precisions = ["bf16-mixed", "32", "16-mixed"]
    cells = [
        Cell("mlp", "mlp", loop, "32")
        for loop in ["raw", "trainkit", "trainkit (nonfinite_loss=ignore)", "lightning"]
    ]
    cells += [Cell("cnn", "cnn", loop, p) for p in precisions for loop in loops]
    # the loss check's wait for the step's kernels, on a GPU-bound model
    unchecked = "trainkit (nonfinite_loss=ignore)"
    cells += [Cell("cnn", "cnn", unchecked, p) for p in ("32", "bf16-mixed")]
    cells += [Cell("gpt", "gpt", loop, "bf16-mixed") for loop in loops]
    cells += [Cell("gpt", "gpt", loop, "bf16-mixed", compiled=True) for loop in loops]
    cells += [Cell("data", "cnn", loop, "bf16-mixed", "pinned") for loop in loops]
    cells += [Cell("data", "cnn", loop, "bf16-mixed", "plain") for loop in ("raw", "trainkit")]
    cells = [cell for cell in cells if not only or cell.section in only]
    for cell in cells:
        if cell.precision == "16-mixed" and not has_cuda:
            cell.status, cell.reason = "skipped", "16-mixed needs a GPU (GradScaler on CUDA)"
    return cells


def lightning_missing() -> str | None:
    try:
        import lightning  # noqa: F401
    except ImportError as error:
        return f"lightning is not installed ({error})"
    return None


# ---- report -------------------------------------------------------------------------------------
def table(cells: list[Cell]) -> str:
    raw = {
        (c.section if c.section != "data" else "cnn", c.workload, c.precision, c.compiled): c
        for c in cells
        if c.loop == "raw" and c.status == "ok" and c.feed == "resident"
    }
    lines = [
        f"{'section':<7} {'case':<30} {'loop':<33} {'samples/s':>11} {'spread':>7} "
        f"{'us/step':>9} {'vs raw':>8}"
    ]
    for c in cells:
        if c.status != "ok":
            lines.append(f"{c.section:<7} {c.label:<30} {c.loop:<33} {c.status}: {c.reason}")
            continue
        base = raw.get(
            (c.section if c.section != "data" else "cnn", c.workload, c.precision, c.compiled)
        )
        versus = ""
        if base is not None and base is not c:
            if c.section == "mlp":
                versus = f"{c.us_per_step - base.us_per_step:+.0f} us"
            else:
                versus = (
                    f"{100 * (c.samples_per_s['median'] / base.samples_per_s['median'] - 1):+.1f}%"
                )
        rate = c.samples_per_s["median"]
        lines.append(
            f"{c.section:<7} {c.label:<30} {c.loop:<33} {rate:>11,.0f} "
            f"{100 * c.samples_per_s['spread']:>6.1f}% {c.us_per_step:>9,.0f} {versus:>8}"
        )
    return "\n".join(lines)


def summary(cells: list[Cell]) -> dict[str, str]:
    """The headline numbers: each loop against the hand-written one, compile on/off, the feeds."""
    ok = {(c.section, c.label, c.loop): c for c in cells if c.status == "ok"}
    lines: dict[str, str] = {}

    def rate(section: str, label: str, loop: str) -> float | None:
        cell = ok.get((section, label, loop))
        return cell.samples_per_s["median"] if cell else None

    raw_mlp = ok.get(("mlp", "mlp 32", "raw"))
    for (section, _, loop), cell in ok.items():
        if section == "mlp" and raw_mlp is not None and cell is not raw_mlp:
            extra = cell.us_per_step - raw_mlp.us_per_step
            lines[f"mlp overhead {loop}"] = f"{extra:+.0f} us/step over raw"
    for label in sorted({c.label for c in cells if c.section in ("cnn", "gpt")}):
        section = "gpt" if label.startswith("gpt") else "cnn"
        base = rate(section, label, "raw")
        for loop in ("trainkit", "trainkit (nonfinite_loss=ignore)", "lightning"):
            value = rate(section, label, loop)
            if base and value:
                lines[f"{label} {loop}"] = f"{100 * (value / base - 1):+.1f}% samples/s vs raw"
    for loop in ("raw", "trainkit", "lightning"):
        eager, compiled = (
            rate("gpt", "gpt bf16-mixed", loop),
            rate("gpt", "gpt bf16-mixed compiled", loop),
        )
        if eager and compiled:
            lines[f"gpt compile speed-up {loop}"] = f"x{compiled / eager:.2f}"
    for feed in ("pinned", "plain"):
        for loop in ("raw", "trainkit", "lightning"):
            resident, fed = (
                rate("cnn", "cnn bf16-mixed", loop),
                rate("data", f"cnn bf16-mixed {feed}", loop),
            )
            if resident and fed:
                lines[f"cnn {feed} loader {loop}"] = (
                    f"{100 * (fed / resident - 1):+.1f}% vs GPU-resident"
                )
    return lines


def environment(device: torch.device) -> dict[str, Any]:
    info: dict[str, Any] = {
        "python": platform.python_version(),
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None,
        "trainkit": getattr(trainkit, "__version__", "?"),
        "device": str(device),
        "cudnn_benchmark": torch.backends.cudnn.benchmark,
        "tf32_matmul": torch.backends.cuda.matmul.allow_tf32,
        "tf32_cudnn": torch.backends.cudnn.allow_tf32,
        "cpus": os.cpu_count(),
    }
    with contextlib.suppress(ImportError):
        import lightning

        info["lightning"] = lightning.__version__
    if device.type == "cuda":
        info["gpu"] = torch.cuda.get_device_name(device)
        info["capability"] = ".".join(map(str, torch.cuda.get_device_capability(device)))
    return info


def default_json() -> Path:
    out = os.environ.get("OUT")
    return Path(out) / "bench_gpu.json" if out else Path("gpu_check_out") / "bench_gpu.json"


@contextlib.contextmanager
def quiet_lightning() -> Iterator[None]:
    names = ("lightning.pytorch", "lightning.fabric", "pytorch_lightning", "lightning_fabric")
    levels = {name: logging.getLogger(name).level for name in names}
    for name in names:
        logging.getLogger(name).setLevel(logging.ERROR)
    try:
        yield
    finally:
        for name, level in levels.items():
            logging.getLogger(name).setLevel(level)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--cpu-smoke", action="store_true", help="tiny sizes on the CPU")
    parser.add_argument("--repeats", type=int, default=5, help="timed windows per run")
    parser.add_argument("--window", type=int, default=10, help="steps per timed window")
    parser.add_argument("--workers", type=int, default=8, help="DataLoader workers (data)")
    parser.add_argument("--budget-s", type=float, default=150.0, help="start no run after this")
    parser.add_argument("--only", default="", help="comma-separated sections (mlp,cnn,gpt,data)")
    parser.add_argument("--json", type=Path, default=None, help="where the results go")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    has_cuda = torch.cuda.is_available()
    smoke = args.cpu_smoke
    path = args.json or default_json()
    result: dict[str, Any] = {
        "command": " ".join(["scripts/bench_gpu.py", *(argv or sys.argv[1:])])
    }
    if not has_cuda and not smoke:
        reason = f"no CUDA device (torch {torch.__version__}); run --cpu-smoke for the code paths"
        print(f"bench_gpu: skipped: {reason}")
        result.update(mode="gpu", skipped=reason, environment=environment(torch.device("cpu")))
        write(path, result)
        return 0
    device = torch.device("cuda", 0) if has_cuda and not smoke else torch.device("cpu")
    if device.type == "cuda":
        torch.cuda.set_device(device)
        torch.backends.cudnn.benchmark = True
    repeats = 2 if smoke else args.repeats
    window = 3 if smoke else args.window
    works = workloads(smoke, window)
    only = {part for part in args.only.split(",") if part}
    cells = plan(only, device.type == "cuda")
    missing = lightning_missing()
    print(
        f"bench_gpu: {'cpu-smoke' if smoke else 'gpu'} on {device}, {repeats} windows a run: "
        + ", ".join(
            f"{name} {work.parameters / 1e6:.2f}M params batch {work.batch_size}"
            for name, work in works.items()
        ),
        flush=True,
    )
    # inductor's C++ build on a small CPU takes minutes: the smoke run checks the wiring only
    backend = "eager" if smoke else "inductor"
    sizes = {name: work.parameters for name, work in works.items()}

    def record() -> None:  # after every cell: a run stopped from outside keeps what it measured
        result.update(
            mode="cpu-smoke" if smoke else "gpu",
            environment=environment(device),
            workloads={
                name: {
                    "parameters": sizes[name],
                    "batch_size": work.batch_size,
                    "unit": work.unit,
                    "warmup_steps": work.warmup,
                    "window_steps": work.window,
                    "repeats": repeats,
                }
                for name, work in works.items()
            },
            cells=[asdict(cell) | {"label": cell.label} for cell in cells],
            summary=summary(cells),
            seconds=time.perf_counter() - started,
        )
        if not has_cuda:
            result["gpu_skipped"] = (
                f"no CUDA device (torch {torch.__version__}): GPU sections not run"
            )
        write(path, result)

    with quiet_lightning():
        for cell in cells:
            if cell.status != "pending":
                continue
            if cell.loop == "lightning" and missing:
                cell.status, cell.reason = "skipped", missing
                continue
            if time.perf_counter() - started > args.budget_s:
                cell.status, cell.reason = "skipped", f"time budget of {args.budget_s:.0f} s spent"
                continue
            workers = 2 if smoke else args.workers
            measure(cell, works[cell.workload], device, repeats, workers, backend)
            print(
                f"  {cell.section:<5} {cell.label:<28} {cell.loop:<33} {cell.status}"
                + (
                    f" {cell.samples_per_s['median']:,.0f} {cell.unit}/s"
                    if cell.status == "ok"
                    else f": {cell.reason}"
                ),
                flush=True,
            )
            record()
    record()
    seconds = time.perf_counter() - started
    print()
    print(table(cells))
    print()
    for key, value in result["summary"].items():
        print(f"  {key:<48} {value}")
    errors = [cell for cell in cells if cell.status == "error"]
    print(
        f"bench_gpu: {len(cells) - len(errors)} of {len(cells)} cells without error in "
        f"{seconds:.0f} s; results in {path}"
    )
    return 1 if errors else 0


def write(path: Path, result: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    sys.exit(main())
