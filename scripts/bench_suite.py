"""The full test suite's time, on this machine and in the quiet reference machine's terms.

    python scripts/bench_suite.py [--busy 2] [--repeat 3] [-- PYTEST_ARGS...]

Each run: the reference job of `scripts/bench_reference.py` (raw torch, two gloo ranks; 1.8 s on the
project's quiet 2-core machine) three times, the suite (`pytest -q`, the README's test command),
the reference job three times again, and a look for processes the suite left behind. `--busy N`
keeps N other processes spinning beside each run (the "busy machine" protocol); `--repeat K`
runs K times in a row on the same checkout. A quiet run's time is also given scaled to the
reference machine (its wall time x 1.8 s / the reference job's median now), so figures taken on a
slower or faster machine compare with the suite's ~10-minute promise. Exits 1 when a run fails
or leaves a process behind.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import psutil

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench_reference import QUIET_REFERENCE_S, reference_job_seconds  # noqa: E402

SPIN = "while True: pass"
MARK = "BENCH_SUITE_RUN"  # in the suite's environment, so its descendants can be told apart


@dataclass
class Run:
    """One suite run: its outcome, its time and the machine's speed around it."""

    returncode: int
    summary: str
    wall_s: float
    cpu_s: float
    machine_cpu_s: float
    reference_s: list[float]
    leftovers: list[str]

    @property
    def green(self) -> bool:
        return self.returncode == 0 and not self.leftovers

    def line(self, busy: int) -> str:
        reference = statistics.median(self.reference_s)
        scaled = (
            f", {self.wall_s * QUIET_REFERENCE_S / reference / 60:.1f} min on the reference machine"
            if busy == 0
            else ""
        )
        left = f", LEFT BEHIND: {'; '.join(self.leftovers)}" if self.leftovers else ""
        return (
            f"rc {self.returncode}: {self.summary}; {_minutes(self.wall_s)} wall, "
            f"{self.cpu_s:,.0f} CPU-s of waited-for processes, {self.machine_cpu_s:,.0f} CPU-s "
            f"of the whole machine (SLURM's job steps included); reference job "
            f"{min(self.reference_s):.2f}-{max(self.reference_s):.2f} s "
            f"(quiet machine {QUIET_REFERENCE_S} s){scaled}{left}"
        )


def _minutes(seconds: float) -> str:
    return f"{int(seconds // 60)}:{int(seconds % 60):02d}"


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _machine_cpu() -> float:
    """CPU seconds the whole machine has spent busy since boot (``/proc/stat``): counts what
    daemons run for the suite too (a SLURM job step's ranks are slurmstepd's, not the suite's
    children), and, in a busy run, the spinning processes."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:8]
    user, nice, system, _idle, _iowait, irq, softirq = map(int, fields)
    return (user + nice + system + irq + softirq) / os.sysconf("SC_CLK_TCK")


def _processes_left(mark: str, grace_s: float = 5.0) -> list[str]:
    """The suite's descendants (their environment carries its mark) still alive after
    ``grace_s`` seconds to finish exiting (one the suite killed at its very end may be)."""
    marked = [
        process
        for process in psutil.process_iter(["pid", "cmdline", "environ"])
        if (process.info["environ"] or {}).get(MARK) == mark
    ]
    _, alive = psutil.wait_procs(marked, timeout=grace_s)
    return [f"{p.info['pid']} {' '.join(p.info['cmdline'] or [])[:120]}" for p in alive]


def run_suite(pytest_args: list[str], busy: int) -> Run:
    """Run the suite once with ``busy`` spinning processes beside it."""
    spinners = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(busy)]
    try:
        reference = [reference_job_seconds() for _ in range(3)]
        mark, started, cpu_before = uuid.uuid4().hex, time.time(), _children_cpu()
        machine_before = _machine_cpu()
        suite = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", *pytest_args],
            cwd=REPO,
            env={**os.environ, MARK: mark},
            capture_output=True,
            text=True,
        )
        wall_s, cpu_s = time.time() - started, _children_cpu() - cpu_before
        machine_cpu_s = _machine_cpu() - machine_before
        reference += [reference_job_seconds() for _ in range(3)]
    finally:
        for spinner in spinners:
            spinner.kill()
            spinner.wait()
    lines = suite.stdout.strip().splitlines()
    summary = next((line.strip("= ") for line in reversed(lines) if " in " in line), "no summary")
    if suite.returncode != 0:
        print(suite.stdout[-4000:], suite.stderr[-2000:], sep="\n", file=sys.stderr)
    return Run(
        suite.returncode, summary, wall_s, cpu_s, machine_cpu_s, reference, _processes_left(mark)
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--busy", type=int, default=0, help="spinning processes beside the suite")
    parser.add_argument("--repeat", type=int, default=1, help="runs in a row")
    parser.add_argument("pytest_args", nargs="*", help="after --: arguments for pytest")
    args = parser.parse_args()
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True
    ).stdout.strip()
    print(f"commit {commit}, {args.busy} busy processes beside the suite", flush=True)
    runs = []
    for number in range(1, args.repeat + 1):
        runs.append(run_suite(args.pytest_args, args.busy))
        print(f"run {number}: {runs[-1].line(args.busy)}", flush=True)
    return 0 if all(run.green for run in runs) else 1


if __name__ == "__main__":
    sys.exit(main())
