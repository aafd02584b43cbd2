"""One equivalence case as a program of its own (tests/helpers/equivalence.py):

    python tests/helpers/equivalence_program.py CASE_JSON FOLDER [--resume-from CHECKPOINT]
    python tests/helpers/equivalence_program.py CASE_JSON FOLDER --evaluate

trains the case (trainkit's launcher starts its ranks, re-running this file) and writes the final
weights to FOLDER/weights.pt; or validates, tests and predicts with the case's strategy and ranks
and writes the metrics and each rank's predictions there."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.helpers.equivalence import Case, evaluate, fit
from trainkit.errors import ConfigError


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("case", type=Case.from_json)
    parser.add_argument("folder", type=Path)
    parser.add_argument("--resume-from", default=None)
    parser.add_argument("--evaluate", action="store_true")
    args = parser.parse_args()
    try:
        if args.evaluate:
            evaluate(args.case, args.folder)
        else:
            fit(args.case, args.folder, args.resume_from)
    except ConfigError as refused:  # as the trainkit command says it: one line, exit 2
        print(f"trainkit: error: {refused}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()
