"""Checkpoint save and load seconds, and the training time a save costs: synchronous saves vs
AsyncCheckpointIO vs a plain ``torch.save`` of the same state, all measured in one run.

    .venv/bin/python scripts/bench_checkpoint.py [--layers 6] [--width 4096] [--every 24] [--saves 3]

A stack of Linear(width, width) layers (6 x 4096^2 + biases = 100.7M parameters) trained with
Adam (a 1.13 GiB checkpoint: weights and two moments), ``trainer.save_checkpoint`` every N steps,
once with the default (synchronous) CheckpointIO and once with AsyncCheckpointIO.

"blocked" is the time the training thread spends inside a save. The background write of an async
save also needs CPU (serialising, CRC32, copying into the page cache): its thread's CPU seconds
are what it can take from training on a machine whose cores training keeps busy; the footer adds
how much slower the steps beside a write were than the median step with no write in flight (noisy
on a shared machine). Target: blocked time per async save <= 15% of a synchronous save's.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))


def build(layers: int, width: int, steps: int, batch: int):
    """The model, its training data, and a callback that saves every N steps and times it."""
    import torch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    from trainkit import Callback, TrainModule

    class Stack(TrainModule):
        def __init__(self) -> None:
            super().__init__()
            self.layers = nn.Sequential(*[nn.Linear(width, width) for _ in range(layers)])

        def training_step(self, batch, batch_idx):
            return self.layers(batch[0]).pow(2).mean()

        def configure_optimizers(self):
            return torch.optim.Adam(self.parameters(), lr=1e-5)

    class SaveEvery(Callback):
        """Saves every N steps; records each save's blocked time and each step's own time."""

        def __init__(self, every: int, path: str) -> None:
            self.every, self.path = every, path
            self.blocked: list[float] = []
            self.steps: list[tuple[float, float]] = []  # (start, end) of each step, saves excluded
            self.mark = 0.0

        def on_train_batch_start(self, trainer, module, batch, batch_idx) -> None:
            self.mark = self.mark or time.perf_counter()

        def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx) -> None:
            now = time.perf_counter()
            self.steps.append((self.mark, now))
            if trainer.global_step % self.every == 0:
                trainer.save_checkpoint(self.path)
                self.blocked.append(time.perf_counter() - now)
            self.mark = time.perf_counter()

    torch.manual_seed(0)
    data = DataLoader(TensorDataset(torch.randn(steps * batch, width)), batch_size=batch)
    return Stack(), data, SaveEvery


def timed_io():
    """A TorchCheckpointIO that records when each (background) write starts and ends, and the CPU
    seconds its thread spent on it."""
    from trainkit.plugins import TorchCheckpointIO

    class TimedIO(TorchCheckpointIO):
        def __init__(self) -> None:
            self.windows: list[tuple[float, float]] = []
            self.cpu: list[float] = []

        def save_checkpoint(self, checkpoint, path, storage_options=None) -> None:
            started, cpu = time.perf_counter(), time.thread_time()
            super().save_checkpoint(checkpoint, path, storage_options)
            self.windows.append((started, time.perf_counter()))
            self.cpu.append(time.thread_time() - cpu)

    return TimedIO()


def timed_async(writer):
    """AsyncCheckpointIO that splits each save's blocked time: waiting for the previous write
    (only when writes are slower than the save interval), then copying to host memory."""
    from trainkit.plugins import AsyncCheckpointIO

    class TimedAsync(AsyncCheckpointIO):
        def __init__(self, checkpoint_io) -> None:
            super().__init__(checkpoint_io)
            self.waited: list[float] = []
            self.copied: list[float] = []

        def save_checkpoint(self, checkpoint, path, storage_options=None) -> None:
            started = time.perf_counter()
            self.wait()
            waited = time.perf_counter()
            super().save_checkpoint(checkpoint, path, storage_options)  # nothing left to wait for
            self.waited.append(waited - started)
            self.copied.append(time.perf_counter() - waited)

    return TimedAsync(writer)


def run_mode(mode: str, args: argparse.Namespace, folder: Path) -> dict:
    """One fit with 'sync' or 'async' saves; its timings, and the trainer."""
    from trainkit import Trainer

    steps = args.every * (args.saves + 1) - 1  # `saves` saves; the last write overlaps N-1 steps
    model, data, save_every = build(args.layers, args.width, steps, args.batch)
    writer = timed_io()
    saver = save_every(args.every, str(folder / f"{mode}.ckpt"))
    plugin = timed_async(writer) if mode == "async" else writer
    trainer = Trainer(
        accelerator="cpu",
        max_steps=steps,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        num_sanity_val_steps=0,
        default_root_dir=str(folder),
        callbacks=[saver],
        plugins=plugin,
    )
    started = time.perf_counter()
    trainer.fit(model, train_dataloaders=data)
    wall = time.perf_counter() - started
    writes = [end - start for start, end in writer.windows]
    return {
        "wall": wall,
        "blocked": saver.blocked,
        "write": writes,
        "write_cpu": writer.cpu,
        "waited": getattr(plugin, "waited", []),
        "copied": getattr(plugin, "copied", []),
        "slower": slower_steps(saver.steps[1:], writer.windows) / len(writes),  # skip warm-up
        "steps": [end - start for start, end in saver.steps],
        "trainer": trainer,
    }


def slower_steps(steps: list[tuple[float, float]], writes: list[tuple[float, float]]) -> float:
    """Seconds the steps that overlapped a write took beyond the median step that did not."""

    def overlaps(step: tuple[float, float]) -> bool:
        return any(start < step[1] and step[0] < end for start, end in writes)

    clear = [end - start for start, end in steps if not overlaps((start, end))]
    typical = statistics.median(clear) if clear else 0.0
    return sum(max(0.0, end - start - typical) for start, end in steps if overlaps((start, end)))


def plain_torch_save(trainer, folder: Path, repeats: int) -> list[float]:
    """torch.save of the very dict a trainkit save writes (no fsync, no rename)."""
    import torch

    from trainkit.checkpoint.state import dump

    checkpoint = dump(trainer.run_state)
    seconds = []
    for _ in range(repeats):
        started = time.perf_counter()
        torch.save(checkpoint, folder / "plain.pt")
        seconds.append(time.perf_counter() - started)
    (folder / "plain.pt").unlink()
    return seconds


def load_seconds(path: Path, repeats: int) -> dict[str, list[float]]:
    """Reading the checkpoint back: trainkit's (weights-only) load and a plain torch.load."""
    import torch

    from trainkit.plugins import TorchCheckpointIO

    found: dict[str, list[float]] = {"trainkit": [], "torch": []}
    for _ in range(repeats):
        for name, load in (
            ("trainkit", lambda: TorchCheckpointIO().load_checkpoint(path)),
            ("torch", lambda: torch.load(path, weights_only=False)),
        ):
            started = time.perf_counter()
            loaded = load()
            found[name].append(time.perf_counter() - started)
            del loaded
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--layers", type=int, default=6)
    parser.add_argument("--width", type=int, default=4096)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--every", type=int, default=24, help="steps between saves")
    parser.add_argument("--saves", type=int, default=3, help="saves per fit")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    parser.add_argument("--dir", default=None, help="where checkpoints go (default: a temp dir)")
    parser.add_argument("--json", default=None, help="also write the raw timings here")
    args = parser.parse_args()
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        folder = Path(tmp)
        results = {}
        for mode in ("sync", "async"):
            results[mode] = run_mode(mode, args, folder)
            print(f"{mode}: {results[mode]['wall']:.2f} s", file=sys.stderr, flush=True)
            gc.collect()
        trainer = results["sync"]["trainer"]
        params = sum(p.numel() for p in trainer.lightning_module.parameters())
        plain = plain_torch_save(trainer, folder, args.saves)
        size = (folder / "sync.ckpt").stat().st_size
        loads = load_seconds(folder / "sync.ckpt", 3)
    for mode in results.values():
        mode.pop("trainer")
    print_table(args, results, plain, loads, params, size)
    if args.json:
        raw = {**results, "plain": plain, "loads": loads, "bytes": size, "params": params}
        Path(args.json).write_text(json.dumps(raw, indent=1))


def print_table(args, results, plain, loads, params, size) -> None:
    """The markdown table docs/benchmarks.md shows."""
    import torch

    median = statistics.median
    sync, later = results["sync"], results["async"]
    sync_blocked = median(sync["blocked"])
    steady = median(later["blocked"][1:] or later["blocked"])
    print(
        f"\n{params / 1e6:.1f}M parameters + Adam: a {size / 2**30:.2f} GiB checkpoint; "
        f"{args.saves} saves per fit, one every {args.every} steps (batch {args.batch}); "
        f"torch {torch.__version__}, {torch.get_num_threads()} threads on {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}\n"
    )
    rows = [
        ("plain `torch.save` of the same state (no fsync)", median(plain), ""),
        ("sync save (temp file, torch.save, fsync, rename): blocked", sync_blocked, ""),
        ("async save: blocked, first save (allocates the host copy)", later["blocked"][0], ""),
        ("async save: blocked, later saves (copy into kept buffers)", steady, " (target <= 0.15)"),
        ("  of which waiting for the previous write", median(later["waited"][1:] or [0]), ""),
        ("  of which copying to host memory", median(later["copied"][1:] or [0]), ""),
        ("async save: background write (beside training)", median(later["write"]), ""),
        ("async save: CPU time of the background write", median(later["write_cpu"]), ""),
        ("load (trainkit, weights-only)", median(loads["trainkit"]), ""),
        ("load (plain torch.load)", median(loads["torch"]), ""),
    ]
    print("| what | seconds | / sync blocked |\n|---|---:|---:|")
    for what, seconds, note in rows:
        print(f"| {what} | {seconds:.3f} | {seconds / sync_blocked:.2f}{note} |")
    steps = {mode: median(results[mode]["steps"][1:]) for mode in results}
    print(
        f"\nmedian step: sync run {steps['sync']:.2f} s, async run {steps['async']:.2f} s "
        f"(steps beside a write: {later['slower']:.1f} s slower per save than the median step with "
        f"no write in flight); fit wall time: sync {sync['wall']:.1f} s, async {later['wall']:.1f} s"
    )


if __name__ == "__main__":
    main()
