"""The reference job: the work a rank does around a start or a teardown, without trainkit.

Two Python processes import torch, join a gloo group over 127.0.0.1, all-reduce once and exit.
The other benchmarks time it in the same run as their own measurements and print their numbers
beside it (and as a ratio to it), so a reader can tell a quiet machine from a busy one and
compare figures taken on different machines.

    .venv/bin/python scripts/bench_reference.py [--repeats 3]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# the reference job on the project's quiet 2-core machine (docs/benchmarks.md records it)
QUIET_REFERENCE_S = 1.8  # measured: 1.67-1.83 s (3 runs, load average 2.5 falling)

REFERENCE_JOB = """
import sys
import torch.distributed as dist
rank, port = int(sys.argv[1]), int(sys.argv[2])
store = dist.TCPStore("127.0.0.1", port, 2, rank == 0, use_libuv=False)
dist.init_process_group("gloo", store=store, rank=rank, world_size=2)
import torch
tensor = torch.ones(1)
dist.all_reduce(tensor)
assert tensor.item() == 2.0
dist.destroy_process_group()
"""


def reference_job_seconds() -> float:
    """Wall time of the reference job, started now."""
    sys.path.insert(0, str(REPO))
    from trainkit.distributed.ports import find_free_port

    port = str(find_free_port())
    started = time.monotonic()
    ranks = [
        subprocess.Popen([sys.executable, "-c", REFERENCE_JOB, str(rank), port]) for rank in (0, 1)
    ]
    try:
        for rank in ranks:
            if rank.wait(timeout=600) != 0:
                raise SystemExit("the reference job (raw torch, 2 gloo ranks) failed")
    finally:
        for rank in ranks:
            if rank.poll() is None:
                rank.kill()
                rank.wait()
    return time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    readings = [reference_job_seconds() for _ in range(args.repeats)]
    print(
        f"reference job (raw torch, 2 gloo ranks): median {statistics.median(readings):.2f} s, "
        f"{', '.join(f'{r:.2f}' for r in readings)} s ({QUIET_REFERENCE_S} s on the quiet machine)"
    )


if __name__ == "__main__":
    main()
