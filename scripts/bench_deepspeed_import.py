"""How long a rank takes to import deepspeed: plain ``import deepspeed`` (which imports mlflow
through deepspeed's autotuner when mlflow is installed) against trainkit's ``import_deepspeed``
(that optional import off). Each variant in a fresh interpreter that has imported torch already,
alternated over repeats; medians and ranges.

    .venv/bin/python scripts/bench_deepspeed_import.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TIMED = """
import json, sys, time
import torch
start = time.perf_counter()
{statement}
print(json.dumps({{"seconds": time.perf_counter() - start, "mlflow": "mlflow" in sys.modules}}))
"""
VARIANTS = {
    "import deepspeed": "import deepspeed",
    "trainkit import_deepspeed()": (
        "from trainkit.strategies.deepspeed import import_deepspeed\nimport_deepspeed()"
    ),
}


def measure(statement: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", TIMED.format(statement=statement)],
        capture_output=True,
        text=True,
        check=True,
        cwd=REPO,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    repeats = parser.parse_args().repeats
    runs: dict[str, list[dict]] = {name: [] for name in VARIANTS}
    for _ in range(repeats):
        for name, statement in VARIANTS.items():
            runs[name].append(measure(statement))
    print(f"{platform.processor() or platform.machine()}, python {platform.python_version()}")
    print("| variant | median s | range s | mlflow imported |")
    print("|---|---:|---:|---|")
    for name, results in runs.items():
        seconds = [r["seconds"] for r in results]
        print(
            f"| `{name}` | {statistics.median(seconds):.2f} | {min(seconds):.2f}-"
            f"{max(seconds):.2f} | {results[0]['mlflow']} |"
        )


if __name__ == "__main__":
    main()
