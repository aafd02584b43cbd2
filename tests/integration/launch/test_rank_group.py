"""Which rank the launcher blames when several fail: the cause, never a consequence."""

from __future__ import annotations

import json
import shutil
import signal
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


def _wait_for_exits(group: RankGroup, *ranks: int) -> None:
    for rank in ranks:
        group.procs[rank].wait(timeout=60)


@pytest.fixture
def cleanup():
    groups: list[RankGroup] = []
    yield groups.append
    for group in groups:
        for proc in group.procs:
            proc.kill()
            proc.wait()
        shutil.rmtree(group.error_dir, ignore_errors=True)


ABORT = "import os, signal; os.kill(os.getpid(), signal.SIGABRT)"
STILL_EXITING = "import time; time.sleep(30)"


def test_a_rank_that_raised_is_blamed_even_while_a_peer_that_aborted_is_already_gone(cleanup):
    group = _group(ABORT, STILL_EXITING)
    cleanup(group)
    _record_error(group, 1, time.time())
    _wait_for_exits(group, 0)
    assert group._first_failure([0]) == 1


def test_a_rank_that_ended_without_an_exception_comes_before_the_errors_of_its_peers(cleanup):
    group = _group("import os; os._exit(3)", "raise SystemExit(1)")
    cleanup(group)
    _wait_for_exits(group, 0, 1)
    _record_error(group, 1, time.time(), "RuntimeError: Connection reset by peer")
    assert group._first_failure([0, 1]) == 0


def test_an_interpreter_the_backend_aborted_comes_before_its_peers_connection_errors(cleanup):
    group = _group(STILL_EXITING, ABORT)  # rank 1 called a collective rank 0 never did
    cleanup(group)
    _wait_for_exits(group, 1)
    _record_error(group, 0, time.time(), "RuntimeError: [gloo/transport/tcp/pair.cc] Read error")
    assert group._first_failure([1]) == 1


def test_a_programs_own_exception_comes_before_an_earlier_connection_error(cleanup):
    group = _group("raise SystemExit(1)", "raise SystemExit(1)")
    cleanup(group)
    _wait_for_exits(group, 0, 1)
    _record_error(group, 0, time.time() - 1.0, "torch.distributed.DistBackendError: timed out")
    _record_error(group, 1, time.time(), "ValueError: boom")
    assert group._first_failure([0, 1]) == 1


def test_the_earliest_exception_wins_among_ranks_that_raised(cleanup):
    group = _group("raise SystemExit(1)", "raise SystemExit(1)")
    cleanup(group)
    _wait_for_exits(group, 0, 1)
    _record_error(group, 0, time.time())
    _record_error(group, 1, time.time() - 1.0)
    assert group._first_failure([0, 1]) == 1


def test_a_rank_that_raised_then_aborted_on_its_way_out_reports_exit_code_1(cleanup, capsys):
    group = _group(ABORT)
    cleanup(group)
    _wait_for_exits(group, 0)
    assert group.procs[0].returncode == -signal.SIGABRT
    _record_error(group, 0, time.time())
    code, _ = group._report(0)
    assert code == 1
    assert "rank 0 failed with exit code 1" in capsys.readouterr().err


def test_a_collective_timeout_comes_before_the_connections_it_closed_on_its_way_out(cleanup):
    # 8 ranks, one hung: the first to time out tears its process group down while exiting, so
    # its peers record "connection closed" before its own timeout error is written
    group = _group(*["raise SystemExit(1)"] * 3)
    cleanup(group)
    _wait_for_exits(group, 0, 1, 2)
    closed = "RuntimeError: [gloo/transport/tcp/pair.cc:553] Connection closed by peer"
    _record_error(group, 2, time.time() - 1.0, closed)
    _record_error(group, 0, time.time(), "RuntimeError: [gloo] Timed out waiting 5000ms for recv")
    _record_error(group, 1, time.time() - 0.5, closed)
    assert group._first_failure([0, 1, 2]) == 0


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
