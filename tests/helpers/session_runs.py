"""Runs a test session makes once, whichever pytest-xdist worker asks for them first."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest
from filelock import FileLock


def made_once(
    tmp_path_factory: pytest.TempPathFactory,
    worker_id: str,
    name: str,
    make: Callable[[Path], dict[str, Path]],
) -> dict[str, Path]:
    """``make(folder)``'s files, made once per session: under pytest-xdist the first worker to
    ask makes them in the folder all workers share (the parent of each one's base temp), the
    others wait on a lock and read the paths it wrote; without workers (``worker_id``, the
    pytest-xdist fixture, is "master"), made here."""
    if worker_id == "master":
        return make(tmp_path_factory.mktemp(name))
    shared = tmp_path_factory.getbasetemp().parent / name
    record = shared / "made.json"
    with FileLock(str(shared) + ".lock"):
        if not record.is_file():
            shared.mkdir(exist_ok=True)  # a worker whose make failed may have left it
            made = make(shared)
            record.write_text(json.dumps({key: str(path) for key, path in made.items()}))
    return {key: Path(path) for key, path in json.loads(record.read_text()).items()}
