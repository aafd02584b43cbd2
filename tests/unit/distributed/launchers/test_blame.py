"""Which rank the launcher blames when several fail: the cause, never a consequence; and how
the blamed rank's end reads."""

from __future__ import annotations

import signal

import pytest

from trainkit.distributed.launchers.blame import how_it_ended, root_cause

ABORTED = -signal.SIGABRT
STILL_EXITING = None  # no exit status yet
CONNECTION_RESET = "RuntimeError: Connection reset by peer"
CONNECTION_CLOSED = "RuntimeError: [gloo/transport/tcp/pair.cc:553] Connection closed by peer"
READ_ERROR = "RuntimeError: [gloo/transport/tcp/pair.cc] Read error"


def raised(at: float, text: str = "ValueError: boom") -> dict[str, object]:
    """The record a rank writes when it raises."""
    return {"time": at, "traceback": f"Traceback (most recent call last):\n{text}"}


def test_a_rank_that_raised_is_blamed_even_while_a_peer_that_aborted_is_already_gone():
    assert root_cause([0], [ABORTED, STILL_EXITING], {0: None, 1: raised(10.0)}) == 1


def test_a_rank_that_ended_without_an_exception_comes_before_the_errors_of_its_peers():
    errors = {0: None, 1: raised(10.0, CONNECTION_RESET)}
    assert root_cause([0, 1], [3, 1], errors) == 0


def test_an_interpreter_the_backend_aborted_comes_before_its_peers_connection_errors():
    # rank 1 called a collective rank 0 never did
    errors = {0: raised(10.0, READ_ERROR), 1: None}
    assert root_cause([1], [STILL_EXITING, ABORTED], errors) == 1


def test_a_programs_own_exception_comes_before_an_earlier_connection_error():
    errors = {
        0: raised(9.0, "torch.distributed.DistBackendError: timed out"),
        1: raised(10.0),
    }
    assert root_cause([0, 1], [1, 1], errors) == 1


def test_the_earliest_exception_wins_among_ranks_that_raised():
    assert root_cause([0, 1], [1, 1], {0: raised(10.0), 1: raised(9.0)}) == 1


def test_a_collective_timeout_comes_before_the_connections_it_closed_on_its_way_out():
    # 8 ranks, one hung: the first to time out tears its process group down while exiting, so
    # its peers record "connection closed" before its own timeout error is written
    errors = {
        0: raised(10.0, "RuntimeError: [gloo] Timed out waiting 5000ms for recv"),
        1: raised(9.5, CONNECTION_CLOSED),
        2: raised(9.0, CONNECTION_CLOSED),
    }
    assert root_cause([0, 1, 2], [1, 1, 1], errors) == 0


def test_among_connection_errors_alone_the_earliest_is_blamed():
    errors = {0: raised(10.0, CONNECTION_RESET), 1: raised(9.0, CONNECTION_CLOSED)}
    assert root_cause([0, 1], [1, 1], errors) == 1


def test_blaming_needs_a_failed_rank():
    with pytest.raises(ValueError, match="at least one failed rank"):
        root_cause([], [0], {0: None})


@pytest.mark.parametrize(
    ("returncode", "error", "reported"),
    [
        (ABORTED, raised(1.0), (1, "failed with exit code 1")),  # raised, aborted on its way out
        (-signal.SIGTERM, raised(1.0), (1, "failed with exit code 1")),  # raised, then stopped
        (STILL_EXITING, raised(1.0), (1, "failed with exit code 1")),
        (ABORTED, None, (134, "was killed by SIGABRT")),
        (-signal.SIGKILL, None, (137, "was killed by SIGKILL")),
        (3, None, (3, "failed with exit code 3")),
        (2, raised(1.0), (2, "failed with exit code 2")),
    ],
)
def test_how_a_failed_rank_ended_reads(returncode, error, reported):
    assert how_it_ended(returncode, error) == reported
