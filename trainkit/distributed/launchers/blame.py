"""Which failed rank caused the failure, and how its end reads: decisions over what the ranks
left behind (their exit statuses and the error records of those that raised), for the launcher
that watches them."""

from __future__ import annotations

import signal
from collections.abc import Mapping, Sequence
from typing import Any

from trainkit.distributed.error_file import (
    is_collective_timeout,
    is_communication_error,
    last_line_of,
)

ErrorRecord = dict[str, Any]  # what a rank that raised wrote: its rank, time and traceback


def root_cause(
    failed: Sequence[int],
    returncodes: Sequence[int | None],
    errors: Mapping[int, ErrorRecord | None],
) -> int:
    """The rank to blame among ``failed`` (local ranks), in this order: a rank that ended without
    an exception (killed, ``os._exit``); the earliest exception of the program itself; an
    interpreter aborted by the backend (SIGABRT: gloo found a mismatched collective); the earliest
    collective timeout (a late rank; the peers it leaves behind when it exits see their
    connections close, often before its own error is recorded); the earliest other
    communication error, which follows from any of those. ``errors`` holds every rank's record,
    a rank that raised counts while it is still exiting: a peer may abort before it is gone."""
    if not failed:
        raise ValueError("root_cause needs at least one failed rank")
    aborted = [
        rank for rank in failed if errors.get(rank) is None and returncodes[rank] == -signal.SIGABRT
    ]
    silent = [rank for rank in failed if errors.get(rank) is None and rank not in aborted]
    reports = {rank: error for rank, error in errors.items() if error}
    raised = sorted(reports, key=lambda rank: reports[rank]["time"])
    own = [rank for rank in raised if not is_communication_error(reports[rank]["traceback"])]
    timeouts = [
        rank for rank in raised if is_collective_timeout(last_line_of(reports[rank]["traceback"]))
    ]
    for candidates in (silent, own, aborted, timeouts, raised):
        if candidates:
            return candidates[0]
    return failed[0]


def how_it_ended(returncode: int | None, error: ErrorRecord | None) -> tuple[int, str]:
    """A failed rank's exit code as the launcher reports it (1 when it raised, even if it was
    stopped or aborted on its way out; 128 + N for signal N) and what happened to it."""
    code = returncode
    if code is None or (error and code <= 0):
        code = 1
    if code < 0:
        return 128 - code, f"was killed by {signal.Signals(-code).name}"
    return code, f"failed with exit code {code}"
