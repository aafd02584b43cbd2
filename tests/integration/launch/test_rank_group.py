"""Where the launcher places its ranks when one fails: the board's phase, with a rank that raised a
collective timeout placed inside the collective (which rank is blamed: tests/unit/distributed/
launchers/test_blame.py)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from trainkit.distributed.launchers.reexec import RankGroup
from trainkit.distributed.rank_board import TRAINING_STEP, RankBoard
from trainkit.distributed.rank_env import World
from trainkit.distributed.signals import BOARD_ENV


def _group(*scripts: str) -> RankGroup:
    group = RankGroup(World(local_world_size=len(scripts)), argv=[])
    group.procs = [subprocess.Popen([sys.executable, "-c", script]) for script in scripts]
    return group


def _record_error(group: RankGroup, rank: int, at: float, text: str = "ValueError: boom") -> None:
    record = {"rank": rank, "time": at, "traceback": text}
    Path(group.error_dir, f"rank{rank}.json").write_text(json.dumps(record))


@pytest.fixture
def cleanup():
    groups: list[RankGroup] = []
    yield groups.append
    for group in groups:
        for proc in group.procs:
            proc.kill()
            proc.wait()
        shutil.rmtree(group.error_dir, ignore_errors=True)


def test_a_rank_that_raised_a_collective_timeout_is_placed_inside_a_collective(
    cleanup, monkeypatch
):
    # the board shows training_step for both; only the one whose error is a timeout was waiting
    group = _group("raise SystemExit(1)", "raise SystemExit(1)")
    cleanup(group)
    monkeypatch.setenv(BOARD_ENV, group.board)
    for rank in (0, 1):
        monkeypatch.setenv("LOCAL_RANK", str(rank))
        RankBoard().mark(TRAINING_STEP, epoch=0, batch=1)
    _record_error(group, 1, time.time(), "RuntimeError: [gloo] Timed out waiting 4000ms for send")
    _record_error(group, 0, time.time(), "ValueError: boom")
    assert [p.in_collective for p in group.positions()] == [False, True]
    assert [r["in_collective"] for r in group.ranks_status()] == [False, True]
