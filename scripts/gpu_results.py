"""scripts/gpu_check.sh's record keeper: a pytest plugin that appends every test's outcome to a
JSON-lines file as it finishes (so a run cut short still leaves what it did), and the summary
that gathers those lines, the machine's description and the benchmark into one JSON.

    pytest -p gpu_results ...                       # with scripts/ on PYTHONPATH; writes $GPU_RESULTS_LINES
    python scripts/gpu_results.py summarize --lines L --env E --bench B [--smoke S] --out OUT.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

LINES_VARIABLE = "GPU_RESULTS_LINES"


def _reason(report: Any) -> str:
    """A skip's reason, or the last line of a failure (its assertion or exception)."""
    longrepr = report.longrepr
    if longrepr is None:
        return ""
    if isinstance(longrepr, tuple):  # a skip: (file, line, "Skipped: reason")
        return str(longrepr[2]).removeprefix("Skipped: ")
    crash = getattr(getattr(longrepr, "reprcrash", None), "message", None)
    text = crash if crash else str(longrepr)
    return text.strip()[-1500:]


def pytest_runtest_logreport(report: Any) -> None:
    """Each test once: its call's outcome, or the setup's when the setup skipped or failed
    (and a teardown error too)."""
    if report.when == "call" or report.outcome != "passed":
        if report.when == "teardown" and report.outcome == "passed":
            return
        path = os.environ.get(LINES_VARIABLE)
        if not path or os.environ.get("PYTEST_XDIST_WORKER"):  # the controller writes
            return
        outcome = report.outcome
        if report.when != "call" and outcome == "failed":
            outcome = "error"
        row = {
            "test": report.nodeid,
            "outcome": outcome,
            "when": report.when,
            "seconds": round(report.duration, 3),
            "reason": _reason(report) if outcome != "passed" else "",
        }
        with open(path, "a") as handle:
            handle.write(json.dumps(row) + "\n")


def read_lines(path: Path) -> list[dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = {}
    if path.is_file():
        for line in path.read_text().splitlines():
            if line.strip():
                row = json.loads(line)
                if row["test"] not in rows or row["outcome"] == "error":
                    rows[row["test"]] = row
    return list(rows.values())


def read_json(path: Path | None) -> Any:
    if path is None or not path.is_file():
        return None
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as error:
        return {"unreadable": f"{path}: {error}"}


def summarize(args: argparse.Namespace) -> int:
    tests = read_lines(args.lines)
    counts: dict[str, int] = {}
    for row in tests:
        counts[row["outcome"]] = counts.get(row["outcome"], 0) + 1
    skipped_why: dict[str, int] = {}
    for row in tests:
        if row["outcome"] == "skipped":
            skipped_why[row["reason"]] = skipped_why.get(row["reason"], 0) + 1
    result = {
        "environment": read_json(args.env),
        "checks": {
            "exit_code": args.pytest_rc,
            "counts": counts,
            "skipped_because": skipped_why,
            "failed": [row for row in tests if row["outcome"] in ("failed", "error")],
            "tests": tests,
        },
        "bench": read_json(args.bench),
        "bench_cpu_smoke": read_json(args.smoke),
        "bench_exit_code": args.bench_rc,
        "seconds": args.seconds,
    }
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    failed = len(result["checks"]["failed"])
    print(
        f"gpu_check: {', '.join(f'{n} {k}' for k, n in sorted(counts.items())) or 'no tests ran'}"
        f"; {failed} to look at; {args.out}"
    )
    for reason, n in skipped_why.items():
        print(f"  skipped {n}: {reason}")
    for row in result["checks"]["failed"]:
        print(f"  {row['outcome']}: {row['test']}: {row['reason'].splitlines()[0][:200]}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="gather gpu_check.sh's results into one JSON")
    commands = parser.add_subparsers(dest="command", required=True)
    gather = commands.add_parser("summarize")
    gather.add_argument("--lines", type=Path, required=True)
    gather.add_argument("--env", type=Path)
    gather.add_argument("--bench", type=Path)
    gather.add_argument("--smoke", type=Path, help="the benchmark's --cpu-smoke results")
    gather.add_argument("--out", type=Path, required=True)
    gather.add_argument("--pytest-rc", type=int, default=None)
    gather.add_argument("--bench-rc", type=int, default=None)
    gather.add_argument("--seconds", type=float, default=None)
    args = parser.parse_args(argv)
    return summarize(args)


if __name__ == "__main__":
    sys.exit(main())
