"""See what each batch/LR scaling rule does, with the one-neuron toy run through trainkit.

    python scripts/ddp_sandbox.py [--ranks 4] [--experiments 1000]

Every run is a real `trainkit fit` (gloo ranks on CPU). Deterministic rows: weight after one epoch.
Noisy rows: inputs/targets get Gaussian noise; the update-step variance is averaged over
``--experiments`` independent neurons trained side by side.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def run(config: str, ranks: int, *extra: str) -> tuple[float, float]:
    argv = [
        sys.executable,
        "-m",
        "trainkit",
        "fit",
        "-c",
        str(REPO / "configs" / config),
        "--trainer.devices",
        str(ranks),
        "--trainer.enable_progress_bar",
        "false",
        *extra,
    ]
    result = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )
    match = re.search(r"neuron: weight=([\d.]+) update_variance=([\de.+-]+)", result.stdout)
    return float(match.group(1)), float(match.group(2))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, default=4)
    parser.add_argument("--experiments", type=int, default=1000)
    args = parser.parse_args()
    n = args.ranks
    noisy = [
        "--data.init_args.noise",
        "0.5",
        "--data.init_args.experiments",
        str(args.experiments),
        "--model.init_args.experiments",
        str(args.experiments),
    ]
    rows = [
        ("1 rank, batch 128, lr 1e-3", "neuron.yaml", 1, []),
        (f"{n} ranks x {128 // n} (effective 128), lr 1e-3", "neuron.yaml", n, []),
        ("1 rank, batch 16, lr 1e-3 (tuned here)", "neuron_linear.yaml", 1, []),
        (f"{n} ranks x 16, lr_scaling linear (x{n})", "neuron_linear.yaml", n, []),
        (f"{n} ranks x 16, lr_scaling sqrt (x{n**0.5:.3g})", "neuron_sqrt.yaml", n, []),
        (f"{n} ranks x 16, no scaling", "neuron_linear.yaml", n, ["--trainer.lr_scaling", "none"]),
    ]
    print(f"{'run':<48} {'weight':>10} {'noisy weight':>13} {'update variance':>16}")
    for name, config, ranks, extra in rows:
        weight, _ = run(config, ranks, *extra)
        noisy_weight, variance = run(config, ranks, *extra, *noisy)
        print(f"{name:<48} {weight:>10.6f} {noisy_weight:>13.6f} {variance:>16.4e}")


if __name__ == "__main__":
    main()
