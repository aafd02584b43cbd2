"""Ops compiled on first use (deepspeed's): a lock left by a killed build is named in one line
instead of hanging the next run, and a build that starts says so (a deepspeed fit beside such a
lock: tests/integration/strategies/test_op_builds.py)."""

from __future__ import annotations

import os
import threading

import pytest

from trainkit.errors import ConfigError
from trainkit.strategies.op_builds import (
    BuildAnnouncer,
    extensions_root,
    lock_holders,
    refuse_stale_locks,
)


def make_lock(root, op="deepspeed_shm_comm"):
    (root / op).mkdir(parents=True)
    lock = root / op / "lock"
    lock.touch()
    return lock


def test_the_extensions_folder_is_torchs_own_or_the_variable(tmp_path, monkeypatch):
    monkeypatch.delenv("TORCH_EXTENSIONS_DIR", raising=False)
    assert extensions_root().name.startswith("py3")  # torch's per-Python folder, e.g. py311_cpu
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path))
    assert extensions_root() == tmp_path


def test_a_lock_no_process_holds_is_named_with_the_command_that_removes_it(tmp_path):
    lock = make_lock(tmp_path)
    with pytest.raises(ConfigError) as raised:
        refuse_stale_locks(tmp_path)
    message = str(raised.value)
    assert "\n" not in message
    assert "op 'deepspeed_shm_comm'" in message
    assert f"rm {lock}" in message
    assert "no process on this host holds it" in message


def test_a_lock_a_running_build_holds_is_left_to_it(tmp_path):
    lock = make_lock(tmp_path)
    fd = os.open(lock, os.O_RDONLY)  # as torch's builder does while it compiles
    try:
        assert lock_holders(lock) == [os.getpid()]
        refuse_stale_locks(tmp_path)  # no error: the build is alive
    finally:
        os.close(fd)
    assert lock_holders(lock) == []


def test_no_locks_no_folder_no_error(tmp_path):
    refuse_stale_locks(tmp_path / "never-made")
    refuse_stale_locks(tmp_path)


def test_a_build_this_process_starts_is_announced_once(tmp_path):
    heard: list[str] = []
    announced = threading.Event()

    def announce(line: str) -> None:
        heard.append(line)
        announced.set()

    with BuildAnnouncer(tmp_path, announce):
        make_lock(tmp_path, "someone_elses_op")  # not held by this process: not ours to announce
        lock = make_lock(tmp_path, "cpu_adam")
        fd = os.open(lock, os.O_RDONLY)
        try:
            assert announced.wait(60)
        finally:
            os.close(fd)
    assert len(heard) == 1
    assert heard[0].startswith("compiling op 'cpu_adam' (first use on this machine: minutes on CPU")
