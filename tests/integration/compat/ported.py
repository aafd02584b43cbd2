"""Run a ported Lightning program as written for trainkit, or with its imports turned back to
Lightning's, and read the final metrics it wrote (rank 0) to $TRAINKIT_COMPAT_RESULT."""

from __future__ import annotations

import json
import os
import re
import sys
from pathlib import Path

from tests.helpers.command_env import REPO, cli_env, run_captured
from tests.helpers.in_process import run_script

PROGRAMS = Path(__file__).parent / "programs"

# the only edits a port makes: these imports (longest first, so a package beats its parent)
LIGHTNING_IMPORTS = [
    # Lightning Fabric's utilities: trainkit.fabric.* is lightning.fabric.* (docs/porting.md)
    ("from trainkit.fabric.", "from lightning.fabric."),
    ("import trainkit.fabric.", "import lightning.fabric."),
    ("from trainkit.callbacks import", "from lightning.pytorch.callbacks import"),
    ("from trainkit.loggers import", "from lightning.pytorch.loggers import"),
    ("from trainkit.strategies import", "from lightning.pytorch.strategies import"),
    ("from trainkit.cli import", "from lightning.pytorch.cli import"),
    ("from trainkit.plugins import", "from lightning.pytorch.plugins import"),
    ("from trainkit.tuner import", "from lightning.pytorch.tuner import"),
    ("from trainkit import", "from lightning.pytorch import"),
    ("import trainkit as pl", "import lightning.pytorch as pl"),
]


def as_lightning(source: str) -> str:
    """The program as it was before the port: Lightning's imports instead of trainkit's."""
    for ours, theirs in LIGHTNING_IMPORTS:
        source = source.replace(ours, theirs)
    # any other module (`from trainkit.callbacks.progress import`) and alias (`as L`)
    source = re.sub(
        r"^from trainkit\.(?!fabric\b)([\w.]+) import",
        r"from lightning.pytorch.\1 import",
        source,
        flags=re.M,
    )
    return re.sub(
        r"^import trainkit as (\w+)", r"import lightning.pytorch as \1", source, flags=re.M
    )


def run_program(
    name: str,
    tmp_path: Path,
    *args: str,
    lightning: bool = False,
    ranks: int = 1,
    timeout: float = 240,
) -> dict:
    """Run ``programs/<name>.py ARGS`` in ``tmp_path``; returns what it wrote as its result. A
    program of one process runs in this interpreter (``runpy``); one that starts ``ranks`` > 1
    runs as its own process (its launcher re-runs the file per rank)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    program = PROGRAMS / f"{name}.py"
    if lightning:
        program = tmp_path / f"{name}_lightning.py"
        program.write_text(as_lightning((PROGRAMS / f"{name}.py").read_text()))
    result = tmp_path / "result.json"
    # one intra-op thread for both frameworks: a matrix product's rounding then depends on the
    # program alone, not on how many threads the BLAS takes on a loaded machine
    env = cli_env(
        TRAINKIT_COMPAT_RESULT=str(result),
        PYTHONPATH=str(REPO),
        OMP_NUM_THREADS="1",
        MKL_NUM_THREADS="1",
    )
    if ranks == 1:
        code = run_script(program, args, tmp_path, env)
        assert code == 0, f"{name} ended with exit code {code} (its output is above)"
        return json.loads(result.read_text())
    proc = run_captured(
        [sys.executable, str(program), *args], cwd=tmp_path, env=env, timeout=timeout
    )
    assert proc.returncode == 0, f"{name} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-6000:]}"
    return json.loads(result.read_text())


def write_result(trainer, **extra) -> None:
    """For the programs: rank 0 writes the final callback metrics (and ``extra``) as JSON."""
    if not trainer.is_global_zero:
        return
    metrics = {name: float(value) for name, value in trainer.callback_metrics.items()}
    with open(os.environ["TRAINKIT_COMPAT_RESULT"], "w") as file:
        json.dump({"metrics": metrics, **extra}, file)


def same_values(ours: dict, theirs: dict, tolerance: float = 1e-6) -> None:
    """Assert the two frameworks' results equal: the same keys, floats within ``tolerance``."""
    assert set(ours) == set(theirs)
    for name, value in theirs.items():
        if isinstance(value, float):
            assert abs(ours[name] - value) <= tolerance, (name, ours[name], value)
        elif isinstance(value, dict):
            same_values(ours[name], value, tolerance)
        else:
            assert ours[name] == value, name
