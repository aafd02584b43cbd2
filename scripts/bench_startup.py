"""Wall time of trainkit's start-up paths against `import torch` and LightningCLI.

    python scripts/bench_startup.py [--repeats 5]

Each command runs in a fresh interpreter; medians of interleaved repetitions are reported.
LightningCLI rows appear when pytorch_lightning is importable by this Python.
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
PY = sys.executable
CONFIG = str(REPO / "configs" / "autoencoder.yaml")

LIGHTNING_CLI = textwrap.dedent("""
    import torch
    from torch import nn
    from pytorch_lightning import LightningModule
    from pytorch_lightning.cli import LightningCLI

    class AutoEncoder(LightningModule):
        def __init__(self, features: int = 32, hidden: int = 64, latent: int = 4, lr: float = 0.01):
            super().__init__()
            self.net = nn.Sequential(nn.Linear(features, hidden), nn.ReLU(), nn.Linear(hidden, features))

    if __name__ == "__main__":
        LightningCLI(AutoEncoder)
""")


def commands(lightning_script: str | None) -> dict[str, list[str]]:
    out = {
        "python -c 'import torch'": [PY, "-c", "import torch"],
        "python -c 'import trainkit'": [PY, "-c", "import trainkit"],
        "trainkit --help": [PY, "-m", "trainkit", "--help"],
        "trainkit fit --help": [PY, "-m", "trainkit", "fit", "-c", CONFIG, "--help"],
        "trainkit fit (fast_dev_run)": [
            PY,
            "-m",
            "trainkit",
            "fit",
            "-c",
            CONFIG,
            "--trainer.fast_dev_run",
            "true",
        ],
    }
    if lightning_script:
        out["LightningCLI --help"] = [PY, lightning_script, "--help"]
        out["LightningCLI fit --help"] = [PY, lightning_script, "fit", "--help"]
    return out


def timed(argv: list[str], cwd: str) -> float:
    start = time.perf_counter()
    subprocess.run(
        argv,
        cwd=cwd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as cwd:
        script = None
        try:
            import pytorch_lightning  # noqa: F401

            script = str(Path(cwd) / "lightning_main.py")
            Path(script).write_text(LIGHTNING_CLI)
        except ImportError:
            pass
        todo = commands(script)
        for argv in todo.values():
            timed(argv, cwd)  # warm the file cache
        samples: dict[str, list[float]] = {name: [] for name in todo}
        for _ in range(args.repeats):
            for name, argv in todo.items():
                samples[name].append(timed(argv, cwd))
    torch_time = statistics.median(samples["python -c 'import torch'"])
    print(f"repeats={args.repeats} python={sys.version.split()[0]}")
    print(f"{'command':<32} {'median s':>9} {'vs import torch':>16}")
    for name, values in samples.items():
        median = statistics.median(values)
        print(f"{name:<32} {median:>9.3f} {median / torch_time:>15.2f}x")
    if script:
        ratio = statistics.median(samples["trainkit fit --help"]) / statistics.median(
            samples["LightningCLI fit --help"]
        )
        print(f"trainkit fit --help / LightningCLI fit --help = {ratio:.2f}")


if __name__ == "__main__":
    main()
