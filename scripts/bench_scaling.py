"""How start-up, checkpoint save/load, failure detection and the per-step agreement cost grow with
the number of ranks: real `trainkit fit` jobs through the launcher at 1, 2, 4, 8 gloo ranks.

    .venv/bin/python scripts/bench_scaling.py [--ranks 1 2 4 8] [--width 1024] [--layers 8]

The model is a stack of Linear(width, width) layers trained with Adam (8 x 1024^2 = 8.4M
parameters, a 101 MB checkpoint with the moments). Per world size the script runs:

- ddp, 24 steps: launch -> process group joined -> first step done (slowest rank), the median
  step, the per-step cost of the preemption agreement (time the training thread spends in
  ``Preemption.should_stop`` per step from the fifth step on, rounds included) and one blocking agreement round (a MAX
  all-reduce of two int64 on a gloo group, median of 20), and ``trainer.save_checkpoint`` at
  step 10 (rank 0 writes the full state);
- the same job resumed from that checkpoint: seconds inside the restore (slowest rank);
- fsdp with ``state_dict_type: sharded`` (N >= 2): save (each rank writes its shards) and restore;
- rank N-1 calling ``os._exit(3)`` at step 5: seconds from its exit until the launcher has
  stopped every rank and returned;
- rank N-1 sleeping in ``training_step`` at step 5 with a 5 s collective timeout: seconds from
  the hang until the launcher returned, minus the timeout, and whether the report names it.

Timings are wall-clock on whatever machine runs this; with more ranks than cores (8 ranks on 2
cores) every rank also waits for a core, which the "cores" column in the output makes visible.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PY = sys.executable
HANG_TIMEOUT = 5

PROBE = textwrap.dedent('''
    """What the scaling benchmark launches: a Linear stack, random data, and a timing callback."""
    import json
    import os
    import statistics
    import time

    import torch
    import torch.distributed as dist
    from torch import nn
    from torch.nn import functional as F
    from torch.utils.data import DataLoader, TensorDataset

    import trainkit.checkpoint.state as checkpoint_state
    import trainkit.loops.preemption as preemption
    from trainkit import Callback, DataModule, TrainModule

    IMPORTED = time.time()
    SPENT = {"should_stop": [], "restore": []}  # seconds of each call


    def _timed(owner, name):
        original = getattr(owner, name)

        def timed(*args, **kwargs):
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                SPENT[name].append(time.perf_counter() - start)

        setattr(owner, name, timed)


    _timed(preemption.Preemption, "should_stop")
    _timed(checkpoint_state, "restore")


    class Stack(TrainModule):
        """Linear(width, width) x layers; rank N-1 may exit or hang at ``fault_step``."""

        def __init__(self, width: int = 1024, layers: int = 8, fault: str = "", fault_step: int = 5,
                     fault_file: str = ""):
            super().__init__()
            self.save_hyperparameters()
            self.net = nn.Sequential(*[nn.Linear(width, width) for _ in range(layers)])

        def forward(self, x):
            return self.net(x)

        def training_step(self, batch, batch_idx):
            h = self.hparams
            last = self.trainer.world_size - 1
            if h.fault and self.global_step == h.fault_step and self.global_rank == last:
                with open(h.fault_file, "w") as handle:
                    handle.write(repr(time.time()))
                if h.fault == "exit":
                    os._exit(3)
                time.sleep(3600)
            (x,) = batch
            return F.mse_loss(self(x), x)

        def configure_optimizers(self):
            return torch.optim.Adam(self.parameters(), lr=1e-4)


    class RandomVectors(DataModule):
        """``samples`` random vectors of size ``width``."""

        def __init__(self, width: int = 1024, samples: int = 2048, batch_size: int = 8):
            super().__init__()
            self.save_hyperparameters()

        def train_dataloader(self):
            h = self.hparams
            data = torch.randn(h.samples, h.width, generator=torch.Generator().manual_seed(0))
            return DataLoader(TensorDataset(data), batch_size=h.batch_size, shuffle=True)


    class Probe(Callback):
        """Writes ``<out>/rank<R>.json``: when this rank got where, and what the steps cost."""

        def __init__(self, out: str = "", save_at: int = -1, save_path: str = ""):
            self.out, self.save_at, self.save_path = out, save_at, save_path
            self.times = {"imported": IMPORTED}
            self.step_starts = []
            self.saved = None

        def setup(self, trainer, pl_module, stage):
            self.times["setup"] = time.time()

        def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):
            self.step_starts.append(time.perf_counter())
            self.times.setdefault("first_step_start", time.time())

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            self.times.setdefault("first_step_end", time.time())
            if trainer.global_step == self.save_at:
                start = time.perf_counter()
                trainer.save_checkpoint(self.save_path)
                self.saved = time.perf_counter() - start

        def on_train_end(self, trainer, pl_module):
            round_seconds = group_seconds = None
            if dist.is_initialized() and dist.get_world_size() > 1:
                start = time.perf_counter()
                group = dist.new_group(backend="gloo")
                group_seconds = time.perf_counter() - start
                flags = torch.zeros(2, dtype=torch.int64)
                samples = []
                for _ in range(21):
                    start = time.perf_counter()
                    dist.all_reduce(flags, op=dist.ReduceOp.MAX, group=group)
                    samples.append(time.perf_counter() - start)
                round_seconds = statistics.median(samples[1:])
            gaps = [b - a for a, b in zip(self.step_starts, self.step_starts[1:])][2:]
            result = {
                "times": self.times,
                "median_step": statistics.median(gaps) if gaps else None,
                "steps": len(self.step_starts),
                # steady state: the first rounds come after every batch until a gap is agreed
                "should_stop": statistics.mean(SPENT["should_stop"][4:] or [0.0]),
                "restore": sum(SPENT["restore"]) if SPENT["restore"] else None,
                "save": self.saved,
                "round": round_seconds,
                "new_group": group_seconds,
            }
            with open(os.path.join(self.out, f"rank{trainer.global_rank}.json"), "w") as handle:
                json.dump(result, handle)
''')


def config(folder: Path, ranks: int, strategy: str, args: argparse.Namespace, **model) -> Path:
    """A run's YAML: the stack, its data, the probe, and a quiet trainer (no loggers or bars)."""
    out = folder / "probe"
    out.mkdir(parents=True, exist_ok=True)
    if strategy == "fsdp":
        strategy_yaml = {
            "class_path": "trainkit.strategies.FSDPStrategy",
            "init_args": {"state_dict_type": "sharded", "auto_wrap_policy": ["Linear"]},
        }
    else:
        strategy_yaml = {"class_path": "trainkit.strategies.DDPStrategy"}
        if model.get("fault") == "hang":
            strategy_yaml["init_args"] = {"timeout": HANG_TIMEOUT}
    text = {
        "seed_everything": 1,
        "model": {
            "class_path": "scaling_probe.Stack",
            "init_args": {"width": args.width, "layers": args.layers, **model},
        },
        "data": {
            "class_path": "scaling_probe.RandomVectors",
            "init_args": {"width": args.width, "samples": 8 * 8 * 40, "batch_size": 8},
        },
        "trainer": {
            "accelerator": "cpu",
            "devices": ranks,
            "strategy": strategy_yaml,
            "max_steps": args.steps,
            "logger": False,
            "enable_checkpointing": False,
            "enable_progress_bar": False,
            "enable_model_summary": False,
            "default_root_dir": str(folder / "run"),
            "callbacks": [
                {
                    "class_path": "scaling_probe.Probe",
                    "init_args": {
                        "out": str(out),
                        "save_at": args.save_at,
                        "save_path": str(folder / "saved.ckpt"),
                    },
                }
            ],
        },
    }
    path = folder / "config.yaml"
    path.write_text(json.dumps(text))  # JSON is YAML
    return path


def launch(folder: Path, cfg: Path, *extra: str) -> tuple[int, float, float, str]:
    """Run ``trainkit fit`` through its launcher: exit code, launch time, return time, stderr."""
    probe_folder = str(folder.parents[2])  # <tmp>/runs/<ranks>/<run>; scaling_probe.py is in <tmp>
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([probe_folder, str(REPO)])}
    env.pop("TRAINKIT_COLLECTIVE_TIMEOUT", None)
    launched = time.time()
    proc = subprocess.run(
        [PY, "-m", "trainkit", "fit", "-c", str(cfg), *extra],
        cwd=folder,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        timeout=900,
    )
    return proc.returncode, launched, time.time(), proc.stderr


def ranks_of(folder: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((folder / "probe").glob("rank*.json"))]


def checked(code: int, stderr: str, what: str) -> None:
    if code != 0:
        raise SystemExit(f"{what} failed with exit code {code}:\n{stderr[-3000:]}")


def measure(root: Path, ranks: int, args: argparse.Namespace) -> dict[str, float | str | None]:
    """Every row of one world size."""
    row: dict[str, float | str | None] = {}
    fit = root / f"ddp{ranks}"
    code, launched, _, stderr = launch(fit, config(fit, ranks, "ddp", args))
    checked(code, stderr, f"ddp at {ranks} ranks")
    results = ranks_of(fit)
    row["joined"] = max(r["times"]["setup"] for r in results) - launched
    row["first_step"] = max(r["times"]["first_step_end"] for r in results) - launched
    row["imported"] = max(r["times"]["imported"] for r in results) - launched
    row["step"] = statistics.median(r["median_step"] for r in results)
    row["agree_per_step"] = max(r["should_stop"] for r in results)
    rounds = [r["round"] for r in results if r["round"] is not None]
    row["round"] = statistics.median(rounds) if rounds else None
    groups = [r["new_group"] for r in results if r["new_group"] is not None]
    row["new_group"] = max(groups) if groups else None
    row["save_ddp"] = max(r["save"] for r in results)

    resumed = root / f"ddp{ranks}-resume"
    cfg = config(resumed, ranks, "ddp", args)
    code, *_, stderr = launch(resumed, cfg, "--ckpt_path", str(fit / "saved.ckpt"))
    checked(code, stderr, f"ddp resume at {ranks} ranks")
    row["load_ddp"] = max(r["restore"] for r in ranks_of(resumed))

    row["save_fsdp"] = row["load_fsdp"] = None
    if ranks > 1:
        sharded = root / f"fsdp{ranks}"
        code, *_, stderr = launch(sharded, config(sharded, ranks, "fsdp", args))
        checked(code, stderr, f"fsdp at {ranks} ranks")
        row["save_fsdp"] = max(r["save"] for r in ranks_of(sharded))
        back = root / f"fsdp{ranks}-resume"
        cfg = config(back, ranks, "fsdp", args)
        code, *_, stderr = launch(back, cfg, "--ckpt_path", str(sharded / "saved.ckpt"))
        checked(code, stderr, f"fsdp resume at {ranks} ranks")
        row["load_fsdp"] = max(r["restore"] for r in ranks_of(back))

    row["exit_detected"] = row["hang_detected"] = row["hang_named"] = None
    if ranks > 1:
        for fault in ("exit", "hang"):
            folder = root / f"{fault}{ranks}"
            stamp = folder / "fault.time"
            cfg = config(folder, ranks, "ddp", args, fault=fault, fault_file=str(stamp))
            code, _, returned, stderr = launch(folder, cfg)
            if code == 0 or not stamp.exists():
                raise SystemExit(f"the injected {fault} did not fail the job:\n{stderr[-3000:]}")
            since = returned - float(stamp.read_text())
            if fault == "exit":
                row["exit_detected"] = since
            else:
                row["hang_detected"] = since - HANG_TIMEOUT
                row["hang_named"] = f"late: rank {ranks - 1} in training_step" in stderr
    return row


def seconds(value: float | str | None, digits: int = 2) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "NO"
    return f"{value:.{digits}f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--width", type=int, default=1024)
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--steps", type=int, default=24)
    parser.add_argument("--save_at", type=int, default=10)
    args = parser.parse_args()
    params = args.layers * (args.width * args.width + args.width)
    print(
        f"{time.strftime('%Y-%m-%d')} python {platform.python_version()} cores {os.cpu_count()} "
        f"model {params / 1e6:.1f}M params (checkpoint ~{params * 12 / 1e6:.0f} MB with Adam)"
    )
    rows: dict[int, dict] = {}
    with tempfile.TemporaryDirectory(prefix="bench_scaling") as tmp:
        root = Path(tmp) / "runs"
        root.mkdir()
        (Path(tmp) / "scaling_probe.py").write_text(PROBE)
        for ranks in args.ranks:
            rows[ranks] = measure(root / str(ranks), ranks, args)
            print(f"  {ranks} ranks: {json.dumps(rows[ranks])}", flush=True)
    labels = [
        ("launch -> ranks imported the model (s)", "imported", 2),
        ("launch -> process group joined (s)", "joined", 2),
        ("launch -> first step done (s)", "first_step", 2),
        ("median step (s)", "step", 4),
        ("agreement: training-thread s per step", "agree_per_step", 6),
        ("agreement: one blocking round (s)", "round", 6),
        ("agreement: creating its gloo group (s)", "new_group", 4),
        ("save, ddp (rank 0 writes all) (s)", "save_ddp", 2),
        ("load on resume, ddp (s)", "load_ddp", 2),
        ("save, fsdp sharded (s)", "save_fsdp", 2),
        ("load on resume, fsdp sharded (s)", "load_fsdp", 2),
        ("rank exits -> launcher returned (s)", "exit_detected", 2),
        (f"rank hangs -> returned, minus the {HANG_TIMEOUT} s timeout (s)", "hang_detected", 2),
        ("hang report names the late rank", "hang_named", 0),
    ]
    print()
    print("| | " + " | ".join(f"{n} rank{'s' if n > 1 else ''}" for n in rows) + " |")
    print("|---|" + "---:|" * len(rows))
    for label, key, digits in labels:
        cells = " | ".join(seconds(rows[n][key], digits) for n in rows)
        print(f"| {label} | {cells} |")


if __name__ == "__main__":
    main()
