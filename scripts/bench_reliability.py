"""The reliability promises in absolute seconds: a crashed rank ends a 2-rank job within 5 s; a
hung rank ends it within the collective timeout + 5 s; a second stop signal ends it within 3 s.

The tests check the same scenarios with bounds stretched by the machine's measured slowdown
(tests/helpers/pace.py); this script holds the promise itself, on the machine it runs on, and
prints the reference job's time beside it so a reader can tell a quiet run from a busy one.

    .venv/bin/python scripts/bench_reliability.py --repeats 3
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.helpers.pace import QUIET_REFERENCE_S, reference_job_seconds
from tests.reliability.runs import write_config

TIMEOUT_S = 4.0


@dataclass
class Scenario:
    """One way a job goes wrong, the promise for how soon it ends, and how to measure it."""

    name: str
    promise_s: float
    measure: Callable[[Path], float]


def _start(folder: Path, config: Path, **env: str) -> subprocess.Popen:
    command = [sys.executable, "-m", "trainkit", "fit", "-c", str(config)]
    command += ["--trainer.default_root_dir", str(folder / "run")]
    return subprocess.Popen(
        command,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, **env},
        start_new_session=True,
    )


def _finish(proc: subprocess.Popen, limit_s: float = 300) -> int:
    try:
        return proc.wait(timeout=limit_s)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def after_fault(fault: str, rank: int, timeout_s: float = 0.0) -> Callable[[Path], float]:
    """Seconds from the injected fault (the rank writes the time) to the launcher's exit, less
    the collective timeout the job is expected to wait out."""

    def measure(folder: Path) -> float:
        fault_file = folder / "fault_time"
        config = write_config(
            folder,
            devices=2,
            fault=fault,
            fault_rank=rank,
            fault_step=2,
            fault_file=str(fault_file),
        )
        env = {"TRAINKIT_COLLECTIVE_TIMEOUT": str(timeout_s)} if timeout_s else {}
        code = _finish(_start(folder, config, **env))
        ended = time.time()
        if code == 0 or not fault_file.exists():
            raise SystemExit(f"{fault} on rank {rank}: the fault never happened (exit {code})")
        return ended - float(fault_file.read_text()) - timeout_s

    return measure


def after_second_signal(folder: Path) -> float:
    """Seconds from a second SIGTERM (sent while the ranks save for the first) to the exit."""
    started = folder / "started"
    config = write_config(
        folder, devices=2, sleep_s=5.0, touch_file=str(started), touch_after_steps=0
    )
    proc = _start(folder, config)
    deadline = time.monotonic() + 300
    while not started.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit("the run never started its first step")
        time.sleep(0.05)  # poll interval for the readiness file
    proc.send_signal(signal.SIGTERM)
    time.sleep(1.5)  # past the 1 s in which a repeat counts as the same signal
    asked = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    _finish(proc)
    return time.monotonic() - asked


SCENARIOS = [
    Scenario("rank 0 SIGKILLed", 5.0, after_fault("kill", 0)),
    Scenario("rank 1 SIGKILLed", 5.0, after_fault("kill", 1)),
    Scenario("rank 1 raises", 5.0, after_fault("raise", 1)),
    Scenario("rank 0 calls exit(3)", 5.0, after_fault("exit", 0)),
    Scenario(f"rank 1 hangs (timeout {TIMEOUT_S:g} s)", 5.0, after_fault("hang", 1, TIMEOUT_S)),
    Scenario("second SIGTERM", 3.0, after_second_signal),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    reference = reference_job_seconds()
    print(f"reference job (raw torch, 2 gloo ranks): {reference:.2f} s ({QUIET_REFERENCE_S} quiet)")
    print(f"{'scenario':<28} {'promise':>8} {'median':>8} {'max':>8}  result")
    broken = 0
    for scenario in SCENARIOS:
        readings = []
        for _ in range(args.repeats):
            with tempfile.TemporaryDirectory(prefix="bench-reliability-") as folder:
                readings.append(scenario.measure(Path(folder)))
        worst = max(readings)
        kept = worst < scenario.promise_s
        broken += not kept
        print(
            f"{scenario.name:<28} {scenario.promise_s:>7.1f}s {statistics.median(readings):>7.2f}s "
            f"{worst:>7.2f}s  {'kept' if kept else 'BROKEN'}",
            flush=True,
        )
    raise SystemExit(1 if broken else 0)


if __name__ == "__main__":
    main()
