"""Draw small Lightning programs from a grammar and run each under trainkit and Lightning.

    python scripts/diff_lightning.py --n 50              # 50 programs drawn from seed 0
    python scripts/diff_lightning.py --n 200 --seed 7    # another 200
    python scripts/diff_lightning.py --spec '{...}'      # one program again, from its JSON

Each program (Trainer arguments from their accepted values, self.log option combinations,
torchmetrics objects, ModelCheckpoint, EarlyStopping, LearningRateMonitor, a callback that logs
or asks to stop, CSV and TensorBoard loggers) runs in this process under both frameworks; the
callback and logged metrics, progress bar names, metrics.csv rows and columns, TensorBoard
steps, checkpoint files, epochs, steps and exceptions are compared (tests/integration/compat/differential.py
says how). Prints one line per program and, for each that differs, its JSON spec and where,
then the differences grouped by cause (how many programs show each, and the first seeds);
a program Lightning refuses and trainkit runs is "lenient" (allowed: docs/compat.md). Exit 1
when any differs. Needs Lightning 2.6 (pip install 'lightning==2.6.*').
"""

from __future__ import annotations

import argparse
import logging
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.integration.compat.differential import LENIENT, Spec, cause, compare, specs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=20, help="programs to draw")
    parser.add_argument("--seed", type=int, default=0, help="seed of the draw")
    parser.add_argument("--spec", help="run one program given as its JSON spec")
    parser.add_argument("--show", type=int, default=20, help="differences shown per program")
    args = parser.parse_args(argv)
    logging.disable(logging.WARNING)  # both frameworks' info lines
    warnings.simplefilter("ignore")
    import torch

    torch.set_num_threads(1)  # one intra-op thread: the same rounding in both
    drawn = [Spec.from_json(args.spec)] if args.spec else specs(args.n, args.seed)
    differing = lenient = 0
    causes: dict[str, list[int]] = {}  # cause -> seeds of the programs that show it
    for index, spec in enumerate(drawn):
        started = time.perf_counter()
        with tempfile.TemporaryDirectory() as folder:
            found = compare(spec, Path(folder))
        took = time.perf_counter() - started
        only_lenient = bool(found) and found[0].startswith(LENIENT)
        verdict = "lenient" if only_lenient else "differs" if found else "same"
        print(f"{index:4d} seed {spec.seed}: {verdict} ({took:.1f}s)")
        if found:
            differing += not only_lenient
            lenient += only_lenient
            print(f"     spec: {spec.to_json()}")
            for line in found[: args.show]:
                print(f"     {line}")
            for kind in sorted({cause(line) for line in found}):
                causes.setdefault(kind, []).append(spec.seed)
        sys.stdout.flush()
    print("differences by cause (programs, first seeds):")
    for kind, seeds in sorted(causes.items(), key=lambda item: -len(item[1])):
        print(f"{len(seeds):5d}  {kind}  ({', '.join(map(str, seeds[:5]))})")
    print(f"{differing} of {len(drawn)} programs differ ({lenient} run where Lightning raised)")
    return 1 if differing else 0


if __name__ == "__main__":
    sys.exit(main())
