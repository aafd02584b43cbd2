"""Check that every strategy computes what one process computes, over generated cases.

    python scripts/check_equivalence.py --all                 # every pair of axis values (~41 cases)
    python scripts/check_equivalence.py --sample 12 --seed 3  # 12 drawn cases
    python scripts/check_equivalence.py --strategy fsdp --sample 4
    python scripts/check_equivalence.py --evaluate            # validate/test/predict, each strategy

Each case trains on real gloo ranks through trainkit's launcher and is compared with the same
training in one process given the whole batch (and, for a resumed case, with its own run that was
never stopped); tests/helpers/equivalence.py says how. Prints one line per case, then the table in
docs/strategies.md: for each strategy and each value of every other axis, ``equal`` when every
case with it trained to the one-process weights, ``documented`` (a refusal or a relation the docs
state), or ``broken``. Exit 1 when a cell is broken.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.helpers.equivalence import (
    AXES,
    STRATEGIES,
    Case,
    Outcome,
    covering_cases,
    run_case,
    run_evaluation,
    sample_cases,
)

MARK = {"equal": "=", "documented": "d", "broken": "X"}


def table(outcomes: list[Outcome]) -> str:
    """Strategy rows x (axis=value) columns: what the cases with that value came to: equal
    (=), a documented difference (d), broken (X), both of two (= d), or no case (.)."""
    cells: dict[tuple[str, str], set[str]] = defaultdict(set)
    for outcome in outcomes:
        for axis in AXES:
            if axis != "strategy":
                value = getattr(outcome.case, axis)
                cells[outcome.case.strategy, f"{axis}={value}"].add(outcome.verdict)
    columns = [f"{axis}={v}" for axis, values in AXES.items() if axis != "strategy" for v in values]
    lines = ["| strategy | " + " | ".join(columns) + " |", "|---" * (len(columns) + 1) + "|"]
    strategies = [s for s in STRATEGIES if any(o.case.strategy == s for o in outcomes)]
    for strategy in strategies:
        row = []
        for column in columns:
            verdicts = cells.get((strategy, column), set())
            marks = [MARK[v] for v in ("broken", "equal", "documented") if v in verdicts]
            row.append(" ".join(marks) or ".")
        lines.append(f"| {strategy} | " + " | ".join(row) + " |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--all", action="store_true", help="every pair of axis values")
    parser.add_argument("--sample", type=int, default=0, help="this many drawn cases")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--strategy", choices=STRATEGIES, help="hold the strategy")
    parser.add_argument(
        "--evaluate", action="store_true", help="validate/test/predict on 2 and 4 ranks instead"
    )
    parser.add_argument("--folder", type=Path, help="keep the runs here (default: a temp folder)")
    parser.add_argument("--timeout", type=float, default=600, help="seconds per run")
    args = parser.parse_args()
    fixed = {"strategy": args.strategy} if args.strategy else {}
    if args.evaluate:
        strategies = [args.strategy] if args.strategy else STRATEGIES
        cases = [Case(s, ranks=r) for s in strategies for r in (2, 4)]
    elif args.all:
        cases = covering_cases(args.seed)
        if args.strategy:
            cases = [c for c in cases if c.strategy == args.strategy]
    else:
        cases = sample_cases(args.sample or len(STRATEGIES), args.seed, **fixed)
    folder = args.folder or Path(tempfile.mkdtemp(prefix="equivalence-"))
    references: dict = {}
    outcomes = []
    start = time.monotonic()
    for number, case in enumerate(cases, 1):
        began = time.monotonic()
        if args.evaluate:
            outcome = run_evaluation(case, folder / case.name, args.timeout)
        else:
            outcome = run_case(case, folder / case.name, references, args.timeout)
        outcomes.append(outcome)
        print(
            f"[{number}/{len(cases)}] {outcome.verdict:10} {case.name}  max |diff| "
            f"{outcome.max_difference:.2g}  {time.monotonic() - began:.0f}s  {outcome.detail}",
            flush=True,
        )
    counts = {v: sum(o.verdict == v for o in outcomes) for v in MARK}
    print(f"\n{len(outcomes)} cases in {time.monotonic() - start:.0f}s: {counts}; runs in {folder}")
    print(table(outcomes))
    documented = sorted({o.detail for o in outcomes if o.verdict == "documented"})
    if documented:
        print("\ndocumented differences:\n" + "\n".join(f"- {d}" for d in documented))
    return 1 if counts["broken"] else 0


if __name__ == "__main__":
    sys.exit(main())
