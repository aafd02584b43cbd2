"""What starts a process, seen by Python's audit events (``sys.addaudithook``).

``watching()`` records the processes this process starts inside a block (tests/unit/conftest.py
holds every unit test to none). As a pytest plugin it counts the tests that start one:
``SPAWN_CENSUS=folder python -m pytest -p tests.helpers.spawn_census`` writes
``folder/<worker>.txt``; ``python -m tests.helpers.spawn_census folder`` sums the files."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

# the audit events Python raises when this process starts another one
STARTS = {
    "subprocess.Popen",
    "os.fork",
    "os.forkpty",
    "os.posix_spawn",
    "os.spawn",
    "os.system",
    "os.exec",
}
# jsonargparse's stub resolver asks a bare interpreter for its sys.path, once per process that
# resolves a signature from stubs: a library's probe (no torch, ~20 ms), not a test's subject
PROBES = ("import sys, json; print(json.dumps(sys.path))",)

WATCHERS: list[list[str]] = []  # the open watching() blocks, innermost last
HOOKED: list[bool] = []  # an audit hook cannot be removed: installed once per process


def started_process(event: str, args: tuple[object, ...]) -> str | None:
    """The process an audit event starts, as a short text (None: the event starts none)."""
    if event not in STARTS:
        return None
    command = args[1] if len(args) > 1 else None
    if isinstance(command, list) and any(probe in command for probe in PROBES):
        return None
    return f"{event} {command if command is not None else args}"[:200]


def audit(event: str, args: tuple[object, ...]) -> None:
    if WATCHERS and (started := started_process(event, args)) is not None:
        for found in WATCHERS:
            found.append(started)


def is_fork(started: str) -> bool:
    """A fork runs this interpreter on (a DataLoader's workers): no new interpreter or program."""
    return started.startswith(("os.fork ", "os.forkpty "))


@contextlib.contextmanager
def watching() -> Iterator[list[str]]:
    """The processes started inside the block (by any thread of this process)."""
    if not HOOKED:
        sys.addaudithook(audit)
        HOOKED.append(True)
    found: list[str] = []
    WATCHERS.append(found)
    try:
        yield found
    finally:  # this block's own list (lists compare equal by content, so not list.remove)
        del WATCHERS[next(i for i, watcher in enumerate(WATCHERS) if watcher is found)]


class Census:
    """The tests seen starting a process, and how many ran."""

    def __init__(self) -> None:
        self.starting: list[str] = []
        self.ran = 0


CENSUS = Census()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    CENSUS.ran += 1
    with watching() as started:
        outcome = yield
    if started:
        runs = "interpreter" if any(not is_fork(text) for text in started) else "fork"
        CENSUS.starting.append(f"{item.nodeid}\t{runs}")
    return outcome


def pytest_sessionfinish(session: pytest.Session) -> None:
    folder = os.environ.get("SPAWN_CENSUS")
    if not folder or not CENSUS.ran:
        return
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    lines = [f"ran {CENSUS.ran}", *sorted(CENSUS.starting)]
    Path(folder, f"{worker}.txt").write_text("\n".join(lines) + "\n")


def summary(folder: Path) -> str:
    """How many tests ran and how many started an interpreter or a program, per test file."""
    ran, starting = 0, []
    for report in sorted(folder.glob("*.txt")):
        first, *rest = report.read_text().splitlines()
        ran += int(first.split()[1])
        starting += rest
    new = [line.split("\t")[0] for line in starting if line.endswith("\tinterpreter")]
    per_file: dict[str, int] = {}
    for nodeid in new:
        name = nodeid.split("::")[0]
        per_file[name] = per_file.get(name, 0) + 1
    rows = [f"{count:4d}  {name}" for name, count in sorted(per_file.items(), key=lambda i: -i[1])]
    head = (
        f"{len(new)} of {ran} tests started an interpreter or a program "
        f"({len(starting) - len(new)} more only forked, as a DataLoader's workers do)"
    )
    return "\n".join([head, *rows])


if __name__ == "__main__":
    print(summary(Path(sys.argv[1])))
