"""Count hung runs of a 2-rank fit with one DataLoader worker per rank (the CPython gh-112275 fork
hang that trainkit.distributed.fork_safety guards against).

    .venv/bin/python scripts/count_fork_hangs.py --runs 120 --hang-after 20
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.integration.reliability.runs import write_config


def run_once(folder: Path, hang_after: float) -> bool:
    """Whether one fit failed to finish within ``hang_after`` seconds (then it is killed)."""
    config = write_config(folder, devices=2, workers=1)
    command = [sys.executable, "-m", "trainkit", "fit", "-c", str(config)]
    command += ["--trainer.default_root_dir", str(folder / "run")]
    proc = subprocess.Popen(
        command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True
    )
    try:
        code = proc.wait(timeout=hang_after)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # the hung worker too: it never set PDEATHSIG
        proc.wait()
        return True
    if code != 0:
        raise SystemExit(f"a run failed with exit code {code} (not a hang): {command}")
    return False


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40)
    parser.add_argument("--hang-after", type=float, default=20.0, help="seconds (a run takes ~4)")
    args = parser.parse_args()
    hung = 0
    for index in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="fork-hang-") as folder:
            hung += run_once(Path(folder), args.hang_after)
        print(f"run {index + 1}/{args.runs}: {hung} hung so far", flush=True)
    print(f"hung: {hung} of {args.runs} (Python {sys.version.split()[0]})")


if __name__ == "__main__":
    main()
