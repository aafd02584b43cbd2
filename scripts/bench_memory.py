"""Per-rank memory of ddp, ddp_sharded, fsdp (layers built in __init__, or shard-first in
configure_model) and fsdp + CPU offload on N CPU ranks, and the peak RSS of a user's own script.

    python scripts/bench_memory.py [--layers 8] [--width 2048] [--ranks 2] [--part counters|script]

A stack of Linear(width, width) layers (8 x 2048^2 = 33.6M parameters) trained 3 steps with Adam.

"counters" (in-process): on each rank, bytes of parameters, gradients and optimizer state held
*locally* (shards only), measured just before the last optimizer step, and the process's peak RSS;
"above base" is the peak RSS above the same run with a one-layer Linear(8, 8) model (imports,
gloo, the loop), so it is what the model itself costs.

"script" (as a user measures it): USER_SCRIPT below, a plain script with the layers built in
configure_model and ``strategy="ddp"`` / ``"fsdp"`` by name, run as ``python script.py`` under
GNU ``time -f %M``: the peak RSS of the largest single process that time waited for (launcher or
rank; getrusage's RUSAGE_CHILDREN, a max, not a sum). Without GNU time the same number comes from
``os.wait4`` (the child's ru_maxrss, which covers its waited-for descendants). The baseline is the
same script with Linear(64, 64). Each process's own peak (VmHWM, sampled every 50 ms) is listed
too, so it shows which process that maximum is. The "+ ckpt" rows turn checkpointing on (a save
at the end of the epoch: fsdp's default 'full' checkpoint gathers the whole state on rank 0;
'sharded' writes each rank's shards) and are compared with ddp + ckpt.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
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
        strategy = FSDPStrategy(cpu_offload=options.get("cpu_offload", False))  # default units
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


def counters(args: argparse.Namespace) -> None:
    """The in-process table: local bytes of state and each rank's own peak RSS."""
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


USER_SCRIPT = textwrap.dedent('''
    """A user's own script: layers built in configure_model, the strategy chosen by name."""
    import os

    import torch
    from torch import nn
    from torch.utils.data import DataLoader, TensorDataset

    from trainkit import Trainer, TrainModule

    torch.set_num_threads(1)
    LAYERS, WIDTH = int(os.environ["BENCH_LAYERS"]), int(os.environ["BENCH_WIDTH"])


    class Stack(TrainModule):
        def __init__(self):
            super().__init__()
            self.layers = None

        def configure_model(self):
            if self.layers is None:
                self.layers = nn.Sequential(*[nn.Linear(WIDTH, WIDTH) for _ in range(LAYERS)])

        def training_step(self, batch, batch_idx):
            return self.layers(batch[0]).pow(2).mean()

        def configure_optimizers(self):
            return torch.optim.Adam(self.parameters(), lr=1e-4)


    def strategy():
        name = os.environ["BENCH_STRATEGY"]
        if name.startswith("fsdp,"):  # "fsdp, one unit" (the default before issue 33), "fsdp, sharded"
            from trainkit.strategies import FSDPStrategy

            if name == "fsdp, one unit":
                return FSDPStrategy(min_num_params=0)
            return FSDPStrategy(state_dict_type="sharded")
        return name


    if __name__ == "__main__":
        Trainer(
            accelerator="cpu",
            devices=int(os.environ["BENCH_RANKS"]),
            strategy=strategy(),
            max_steps=3,
            logger=False,
            enable_progress_bar=False,
            enable_checkpointing=bool(os.environ.get("BENCH_CHECKPOINT")),
            num_sanity_val_steps=0,
        ).fit(Stack(), DataLoader(TensorDataset(torch.randn(64, WIDTH)), batch_size=8))
''')
# row -> (the script's environment, the row it is compared with)
SCRIPT_CASES = {
    "ddp": ({"BENCH_STRATEGY": "ddp"}, "ddp"),
    "fsdp": ({"BENCH_STRATEGY": "fsdp"}, "ddp"),
    "fsdp, one unit": ({"BENCH_STRATEGY": "fsdp, one unit"}, "ddp"),
    "ddp + ckpt": ({"BENCH_STRATEGY": "ddp", "BENCH_CHECKPOINT": "1"}, "ddp + ckpt"),
    "fsdp + full ckpt": ({"BENCH_STRATEGY": "fsdp", "BENCH_CHECKPOINT": "1"}, "ddp + ckpt"),
    "fsdp + sharded ckpt": (
        {"BENCH_STRATEGY": "fsdp, sharded", "BENCH_CHECKPOINT": "1"},
        "ddp + ckpt",
    ),
}


def gnu_time() -> str | None:
    """The path of GNU time, if installed (``-f %M`` is GNU's)."""
    path = shutil.which("time") or ("/usr/bin/time" if Path("/usr/bin/time").is_file() else None)
    if path is None:
        return None
    probe = subprocess.run([path, "--version"], capture_output=True, text=True)
    return path if "GNU" in probe.stdout + probe.stderr else None


def process_peaks(root_pid: int, peaks: dict[int, tuple[str, int]]) -> None:
    """Record the VmHWM (peak RSS so far, KiB) of ``root_pid`` and each live descendant by pid,
    with its role (GNU time itself is left out)."""
    import psutil

    try:
        root = psutil.Process(root_pid)
        tree = [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return
    for proc in tree:
        try:
            if proc.name() == "time":
                continue
            status = Path(f"/proc/{proc.pid}/status").read_text()
            hwm = next(
                int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM")
            )
            rank = proc.environ().get("LOCAL_RANK")
        except (psutil.Error, OSError, StopIteration):
            continue
        peaks[proc.pid] = (f"rank {rank}" if rank is not None else "launcher", hwm)


def run_script(folder: Path, env: dict[str, str], timer: str | None) -> tuple[int, dict[str, int]]:
    """Run ``python script.py`` in ``folder`` (under GNU time if given): the peak RSS in KiB that
    time (or wait4) reports, and each process's own peak by role."""
    command = [sys.executable, "script.py"]
    if timer:
        command = [timer, "-f", "%M", *command]
    proc = subprocess.Popen(
        command, cwd=folder, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    peaks: dict[int, tuple[str, int]] = {}
    stderr_lines: list[bytes] = []
    os.set_blocking(proc.stderr.fileno(), False)  # type: ignore[union-attr]
    while True:
        process_peaks(proc.pid, peaks)
        chunk = proc.stderr.read()  # type: ignore[union-attr]
        if chunk:
            stderr_lines.append(chunk)
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            break
        time.sleep(0.05)
    proc.returncode = os.waitstatus_to_exitcode(status)
    rest = proc.stderr.read()  # type: ignore[union-attr]
    err = b"".join([*stderr_lines, rest or b""]).decode(errors="replace")
    if proc.returncode != 0:
        raise SystemExit(f"{folder}/script.py failed ({proc.returncode}):\n{err[-3000:]}")
    peak = int(err.strip().splitlines()[-1]) if timer else usage.ru_maxrss
    roles: dict[str, int] = {}
    for role, hwm in peaks.values():
        roles[role] = max(roles.get(role, 0), hwm)
    return peak, roles


def script(args: argparse.Namespace) -> None:
    """The user's script under time -f %M (or wait4): peak RSS of the largest process."""
    timer = gnu_time() if args.timer == "auto" else None
    how = f"GNU time -f %M ({timer})" if timer else "os.wait4 ru_maxrss (GNU time not used)"
    print(
        f"\nA user's script (layers in configure_model, strategy by name, "
        f"torch.set_num_threads(1)) on {args.ranks} ranks; peak RSS of the largest process by "
        f"{how}; baseline: Linear(64, 64); MiB; '+ ckpt': enable_checkpointing=True"
    )
    print(f"{'run':<20} {'base':>6} {'peak':>6} {'above':>6} {'vs':>17}   per process")
    above: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as folder:
        for name, (case, reference) in SCRIPT_CASES.items():
            measured = {}
            for width in (64, args.width):
                run = Path(folder, f"{name} {width}".replace(" ", "_").replace(",", ""))
                run.mkdir()
                (run / "script.py").write_text(USER_SCRIPT)
                env = {
                    **os.environ,
                    **case,
                    "PYTHONPATH": str(REPO),
                    "BENCH_LAYERS": str(args.layers),
                    "BENCH_WIDTH": str(width),
                    "BENCH_RANKS": str(args.ranks),
                }
                measured[width] = run_script(run, env, timer)
                if case.get("BENCH_CHECKPOINT") and not any(run.glob("**/*.ckpt")):
                    raise SystemExit(f"{name}: no checkpoint was written under {run}")
            (base, _), (peak, roles) = measured[64], measured[args.width]
            above[name] = (peak - base) / 1024
            each = ", ".join(f"{role} {kib / 1024:.0f}" for role, kib in sorted(roles.items()))
            print(
                f"{name:<20} {base / 1024:>6.0f} {peak / 1024:>6.0f} {above[name]:>6.0f} "
                f"{above[name] / above[reference]:>5.2f}x {reference:<11}   {each}"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--layers", type=int, default=8)
    parser.add_argument("--width", type=int, default=2048)
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument(
        "--part", choices=["counters", "script"], help="only this part (default: both)"
    )
    parser.add_argument(
        "--timer",
        choices=["auto", "wait4"],
        default="auto",
        help="script part: GNU time if installed (auto), or os.wait4's ru_maxrss",
    )
    parser.add_argument("--run", help=argparse.SUPPRESS)
    parser.add_argument("--out", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.run:
        train(args.run, args.layers, args.width, args.out, args.ranks)
        return
    if args.part in (None, "counters"):
        counters(args)
    if args.part in (None, "script"):
        script(args)


if __name__ == "__main__":
    main()
