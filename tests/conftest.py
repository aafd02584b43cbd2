"""Shared fixtures: a quiet Trainer factory, the CLI run in this process (``run_main``) and the
real console script in a new interpreter (``run_cli``, ``start_cli``).

A time limit here or in a test is a generous ceiling that only stops a hang (pytest-timeout's
marker, or a ``timeout=`` of a subprocess call), never a measurement: how fast trainkit ends a
failed job or starts its ranks is measured by ``scripts/bench_*.py``."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from tests.helpers.command_env import REPO, cli_env, run_captured

# the ceiling of a trainkit command a test runs to its end (it only stops a hang)
COMMAND_CEILING_S = 300.0

# the full tier's tests: they start interpreters, ranks, clusters or servers (tests/unit/ runs
# in this process; tests/unit/test_test_layout.py holds it)
SLOW_FOLDERS = {"integration"}
PROCESS_FIXTURES = {"run_cli", "start_cli", "no_leftovers", "straight_run"}


def starts_processes(item: pytest.Item) -> bool:
    """Whether a test belongs to the full tier only (``-m "not slow"`` is the fast tier): it
    sits in tests/integration/, uses a fixture that starts processes, or says so with
    ``@pytest.mark.slow``."""
    folder = Path(str(item.path)).relative_to(REPO / "tests").parts[0]
    fixtures = set(getattr(item, "fixturenames", ()))
    return folder in SLOW_FOLDERS or bool(fixtures & PROCESS_FIXTURES) or "slow" in item.keywords


def pytest_configure(config):
    """The suite compiles deepspeed's ops into its own folder (built once per checkout), so a
    test killed mid-build never leaves a lock in the user's own cache; locks no process holds
    there are swept by the controller before any worker starts."""
    from trainkit.strategies.op_builds import build_locks, lock_holders

    root = REPO / ".cache" / "torch_extensions"
    os.environ.setdefault("TORCH_EXTENSIONS_DIR", str(root))
    controller = "PYTEST_XDIST_WORKER" not in os.environ
    if controller and Path(os.environ["TORCH_EXTENSIONS_DIR"]) == root:
        for lock in build_locks(root):
            if not lock_holders(lock):
                lock.unlink(missing_ok=True)
    # pytest keeps its rewritten test modules, as every other interpreter keeps compiled ones
    sys.dont_write_bytecode = False
    if controller:
        compile_sources()


def pytest_collection_finish(session):
    """Once the tests are collected, the objects alive then (torch, trainkit, every test module)
    live as long as the worker: ``gc.freeze()`` takes them out of the cycle collector's passes,
    so a full collection a test runs (the tuner runs one after each trial, as Lightning does)
    walks what the tests made, not the whole interpreter, as in a user's smaller process."""
    import gc

    gc.freeze()


def compile_sources() -> None:
    """Byte-compile trainkit and the tests once, before any worker starts: the suite starts
    hundreds of interpreters, and where ``PYTHONDONTWRITEBYTECODE`` is set (containers often
    set it) each of them would compile every module it imports again (~0.1 s of CPU each)."""
    import compileall

    for folder in ("trainkit", "tests"):
        compileall.compile_dir(REPO / folder, quiet=1)


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(config, items):
    """``gpu`` tests run only where CUDA is available. Under pytest-xdist, ``xdist_group`` asks
    to keep together the tests that share one SLURM cluster (the files with a test marked
    ``slurm``), the two-node tests (their own network namespaces, made once per worker) and the
    tests that compare with the session's never-interrupted runs (``straight_run``): it saves
    work, and nothing depends on it. SLURM tests take turns on a lock whichever worker runs them
    (tests/integration/clusters/conftest.py), and runs made once are made under a lock (session_runs.py)."""
    import torch

    # a file with a test marked slurm may share its cluster (a module fixture) with its others
    on_slurm = {item.path for item in items if item.get_closest_marker("slurm")}
    for item in items:
        if starts_processes(item):
            item.add_marker(pytest.mark.slow)
        if Path(str(item.path)).name == "test_two_nodes.py":  # own namespaces, no SLURM
            item.add_marker(pytest.mark.xdist_group("two_nodes"))
        elif item.path in on_slurm:
            item.add_marker(pytest.mark.xdist_group("clusters"))
        elif "straight_run" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.xdist_group("straight_run"))
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def make_trainer(tmp_path):
    """Build a CPU Trainer writing under tmp_path, with no bar/logger/checkpoints unless asked."""
    from trainkit import Trainer

    def make(**kwargs):
        options = dict(
            accelerator="cpu",
            devices=1,
            default_root_dir=str(tmp_path),
            enable_progress_bar=False,
            logger=False,
            enable_checkpointing=False,
            num_sanity_val_steps=0,
        )
        options.update(kwargs)
        return Trainer(**options)

    return make


def run_trainkit(
    *args: str, cwd: Path, timeout: float | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess:
    """Run ``python -m trainkit ARGS`` in ``cwd`` and wait (at most ``COMMAND_CEILING_S`` unless
    told); returns the CompletedProcess with its output as text."""
    return run_captured(
        [sys.executable, "-m", "trainkit", *args],
        cwd=cwd,
        timeout=COMMAND_CEILING_S if timeout is None else timeout,
        env=env or cli_env(),
    )


@pytest.fixture
def run_cli(tmp_path):
    """Run ``python -m trainkit ARGS`` in tmp_path; returns the CompletedProcess."""

    def run(
        *args: str, timeout: float | None = None, env: dict[str, str] | None = None
    ) -> subprocess.CompletedProcess:
        return run_trainkit(*args, cwd=tmp_path, timeout=timeout, env=env)

    return run


@pytest.fixture
def run_main(tmp_path, capfd):
    """Run ``trainkit ARGS`` in tmp_path through ``trainkit.cli.main`` in this process; returns a
    CompletedProcess (returncode, stdout, stderr) as ``run_cli`` does, and puts back the
    process-wide state the command changed (tests/helpers/in_process.py)."""
    from tests.helpers.in_process import run_main as run_in_process

    def run(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
        return run_in_process(args, tmp_path, capfd.readouterr, env=env)

    return run


@pytest.fixture
def autoencoder_config():
    return str(REPO / "configs" / "autoencoder.yaml")


def processes_mentioning(marker: str) -> list[psutil.Process]:
    """Running processes whose command line mentions ``marker``."""
    found = []
    for proc in psutil.process_iter(["cmdline"]):
        try:
            if any(marker in part for part in proc.info["cmdline"] or ()):
                found.append(proc)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return found


@pytest.fixture
def no_leftovers(tmp_path):
    """After the test, no process whose command line mentions this test's folder may survive."""
    yield
    deadline = time.monotonic() + 30  # a ceiling: they normally go at once
    while processes_mentioning(str(tmp_path)) and time.monotonic() < deadline:
        time.sleep(0.1)
    leftovers = processes_mentioning(str(tmp_path))
    for proc in leftovers:
        proc.kill()
    assert not leftovers, f"orphaned processes: {[p.pid for p in leftovers]}"


@pytest.fixture
def start_cli(tmp_path, no_leftovers):
    """Start ``python -m trainkit ARGS --trainer.default_root_dir tmp_path`` (a Popen)."""
    started: list[subprocess.Popen] = []

    def start(*args: str, root=None, env=None) -> subprocess.Popen:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "trainkit",
                *args,
                "--trainer.default_root_dir",
                str(root or tmp_path),
            ],
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env or cli_env(),
        )
        started.append(proc)
        return proc

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
