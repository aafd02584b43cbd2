"""The reliability promises in absolute seconds: a crashed rank ends a 2-rank job within 5 s; a
hung rank (or a collective only one rank calls, or the strategy's own timeout) ends it within the
collective timeout + 5 s; a rank stuck in its data loader is named within the timeout + 20 s of
the start; a second stop signal ends it within 3 s; SIGTERM to the launcher of a hung rank within
10 s.

The tests (tests/integration/reliability/test_crashes_and_hangs.py, test_preemption.py,
tests/integration/strategies/test_ddp.py) check what happens in each scenario, with time limits that only
stop a hang; this script holds the promise itself, on the machine it runs on, and prints the
reference job (scripts/bench_reference.py, raw torch) timed in the same run beside it, and each
median as a ratio to it, so a reader can tell a quiet run from a busy one.

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

from bench_reference import QUIET_REFERENCE_S, reference_job_seconds

from tests.integration.reliability.runs import write_config

REPO = Path(__file__).resolve().parents[1]
TIMEOUT_S = 4.0


@dataclass
class Scenario:
    """One way a job goes wrong, the promise for how soon it ends, and how to measure it."""

    name: str
    promise_s: float
    measure: Callable[[Path], float]


def _start(folder: Path, config: Path, *options: str, **env: str) -> subprocess.Popen:
    command = [sys.executable, "-m", "trainkit", "fit", "-c", str(config), *options]
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


def after_fault(
    fault: str, rank: int, timeout_s: float = 0.0, *options: str, by_strategy: bool = False
) -> Callable[[Path], float]:
    """Seconds from the injected fault (the rank writes the time) to the launcher's exit, less
    the collective timeout the job is expected to wait out (set by the environment, or by the
    strategy's ``timeout`` in ``options`` when ``by_strategy``)."""

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
        by_env = timeout_s and not by_strategy
        env = {"TRAINKIT_COLLECTIVE_TIMEOUT": str(timeout_s)} if by_env else {}
        code = _finish(_start(folder, config, *options, **env))
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


def stuck_in_data_loader(folder: Path) -> float:
    """Seconds from the launch to the exit of a job whose rank 1 stops getting batches from its
    data-loader worker, less the 4 s collective timeout (start-up and teardown included)."""
    config = write_config(folder, devices=2, workers=1, data={"stall_rank": 1, "stall_after": 12})
    started = time.monotonic()
    env = {"TRAINKIT_COLLECTIVE_TIMEOUT": str(TIMEOUT_S), "TMPDIR": str(folder)}
    _finish(_start(folder, config, **env))
    return time.monotonic() - started - TIMEOUT_S


def sigterm_to_a_hung_ranks_launcher(folder: Path) -> float:
    """Seconds from SIGTERM to the launcher (while rank 1 hangs in its training step, so it
    cannot stop gracefully) to the launcher's exit."""
    marker = folder / "rank1-hangs"
    config = REPO / "configs" / "autoencoder.yaml"
    options = ["--model", "tests.helpers.models.Failing", "--model.init_args.how", "hang"]
    options += ["--model.init_args.fail_step", "2", "--model.init_args.marker", str(marker)]
    proc = _start(folder, config, *options, "--trainer.devices", "2", TRAINKIT_STOP_GRACE="1")
    deadline = time.monotonic() + 300
    while not marker.exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            raise SystemExit("rank 1 never reached its hang")
        time.sleep(0.05)  # poll interval for the readiness file
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
    Scenario(
        "strategy timeout (3 s) hang",
        5.0,
        after_fault(
            "hang",
            0,
            3.0,
            "--trainer.strategy",
            "trainkit.strategies.DDPStrategy",
            "--trainer.strategy.timeout",
            "3",
            by_strategy=True,
        ),
    ),
    Scenario("collective on one rank", 5.0, after_fault("extra_collective", 1, TIMEOUT_S)),
    Scenario("rank stuck in data loader", 20.0, stuck_in_data_loader),
    Scenario("second SIGTERM", 3.0, after_second_signal),
    Scenario("SIGTERM, hung rank", 10.0, sigterm_to_a_hung_ranks_launcher),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    reference = reference_job_seconds()
    print(f"reference job (raw torch, 2 gloo ranks): {reference:.2f} s ({QUIET_REFERENCE_S} quiet)")
    print(f"{'scenario':<28} {'promise':>8} {'median':>8} {'max':>8} {'/ref':>6}  result")
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
            f"{worst:>7.2f}s {statistics.median(readings) / reference:>6.2f}  "
            f"{'kept' if kept else 'BROKEN'}",
            flush=True,
        )
    raise SystemExit(1 if broken else 0)


if __name__ == "__main__":
    main()
