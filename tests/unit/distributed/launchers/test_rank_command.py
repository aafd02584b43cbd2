"""The command a launcher's ranks run: this process's own argv, or the trainkit command that
``trainkit.cli.main(argv)`` was called with from code."""

from __future__ import annotations

import sys
import types

import pytest

from trainkit.distributed.launchers.rank_command import ranks_run
from trainkit.distributed.launchers.reexec import can_reexecute, current_command


def test_ranks_run_the_given_command_inside_the_block_only(monkeypatch):
    # a session that cannot be run again: ``python -c``
    monkeypatch.setitem(sys.modules, "__main__", types.ModuleType("__main__"))
    monkeypatch.setattr(sys, "argv", ["-c"])
    assert not can_reexecute()
    command = ["python3", "-m", "trainkit", "fit", "-c", "config.yaml"]
    with ranks_run(command):
        assert current_command() == command and can_reexecute()
    with pytest.raises(RuntimeError, match="cannot be re-executed per rank"):
        current_command()
