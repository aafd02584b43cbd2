"""How fast this machine runs right now, so that a time bound measures trainkit, not the neighbours.

The reference job is the work a rank does around a start or a teardown, without trainkit: two
Python processes import torch, join a gloo group over 127.0.0.1, all-reduce once and exit. A
bound in a test is its promise on a quiet machine scaled by how much slower that job runs at this
moment (never by less than 1); the job runs only when a duration is over its quiet promise, so
a quiet machine pays nothing for it. Wall limits (generous limits that only catch a hang) scale by the
same job timed once when a pytest worker starts. The absolute promises are measured on their own
by ``scripts/bench_reliability.py`` (docs/reliability.md).
"""

from __future__ import annotations

import functools
import subprocess
import sys
import time

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
    from trainkit.distributed.ports import find_free_port

    port = str(find_free_port())
    started = time.monotonic()
    ranks = [
        subprocess.Popen([sys.executable, "-c", REFERENCE_JOB, str(rank), port]) for rank in (0, 1)
    ]
    try:
        for rank in ranks:
            assert rank.wait(timeout=600) == 0, "the reference job (raw torch, 2 ranks) failed"
    finally:
        for rank in ranks:
            if rank.poll() is None:
                rank.kill()
                rank.wait()
    return time.monotonic() - started


class Pace:
    """Checks a duration against a quiet machine's promise, stretched by the slowdown measured
    when the duration is over that promise (the reference job runs only then, right after)."""

    def __init__(self) -> None:
        self.readings: list[float] = []  # the reference job's seconds, in the order measured

    @property
    def slowdown(self) -> float:
        """How many times slower than the quiet machine the worst reading was (at least 1)."""
        return max([1.0, *(reading / QUIET_REFERENCE_S for reading in self.readings)])

    def bound(self, promise_s: float) -> float:
        """The quiet machine's promise, stretched by the slowdown measured so far."""
        return promise_s * self.slowdown

    def check(self, seconds: float, promise_s: float, what: str) -> None:
        """Fail unless ``seconds`` is within the promise, stretched by the machine's slowdown
        (measured twice when needed: the load may change between two readings)."""
        for _ in range(2):
            if seconds < self.bound(promise_s):
                return
            self.readings.append(reference_job_seconds())
        assert seconds < self.bound(promise_s), (
            f"{what} took {seconds:.2f} s, over {self.bound(promise_s):.2f} s = {promise_s} s on a "
            f"quiet machine x slowdown {self.slowdown:.2f} (reference job "
            f"{', '.join(f'{r:.2f}' for r in self.readings)} s now, {QUIET_REFERENCE_S} s quiet)"
        )


def pace_now() -> float:
    """The slowdown measured at this moment (at least 1)."""
    pace = Pace()
    pace.readings.append(reference_job_seconds())
    return pace.slowdown


@functools.cache
def worker_slowdown() -> float:
    """The slowdown when this pytest worker first asked (one reference job per process)."""
    return pace_now()


def wall(seconds: float) -> float:
    """A wall limit (it only catches a hang) stretched for a slow machine."""
    return seconds * worker_slowdown()
