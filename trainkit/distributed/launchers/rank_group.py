"""One start of every local rank of a node: the child processes, the loop that watches them,
the teardown, and the report that blames the rank that failed first."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any

from trainkit.distributed.error_file import (
    is_collective_timeout,
    is_communication_error,
    last_line_of,
)
from trainkit.distributed.launchers.blame import how_it_ended, root_cause
from trainkit.distributed.launchers.job_nodes import JobNodes
from trainkit.distributed.launchers.node_report import lost_contact, timed_out
from trainkit.distributed.launchers.rank_command import (
    build_rank_command,
    saved_mark,
    stop_grace,
)
from trainkit.distributed.rank_board import (
    RankPosition,
    behind,
    create_board,
    explain,
    late_ranks,
    read_board,
)
from trainkit.distributed.rank_env import World
from trainkit.distributed.scratch import scratch_folder
from trainkit.distributed.signals import (
    PREEMPTED_EXIT_CODE,
    RESTART_ENV,
    SAME_NOTICE_SECONDS,
    STOP_GRACE_ENV,
    STOP_SIGNALS,
    die_with_parent,
    ignore_stop_signals,
    say_from_handler,
)

GRACE_SECONDS = 3.0
POLL_SECONDS = 0.05
EXITING_SECONDS = 1.0  # how long a rank that raised gets to exit by itself once blamed


class RankGroup:
    """The child processes of one launch attempt and the logic that watches them. On several
    nodes, ``nodes`` is this node's launcher among the others: asked about this node's ranks,
    told when they failed, and asking the others when they only lost contact."""

    def __init__(
        self, world: World, argv: list[str], restart: int = 0, nodes: JobNodes | None = None
    ) -> None:
        self.world = world
        self.nodes = nodes
        self.node_lines: list[str] = []  # what the other nodes said about a failure here
        self.cause_elsewhere = ""  # the first of them, where this node's ranks only followed
        self.stopped_for = ""  # another node said the job failed there: which, and why
        self.argv = argv
        self.restart = restart  # how many times the job was started again before this attempt
        self.cause = ""  # after a failure: which rank failed and why, in one line
        self.procs: list[subprocess.Popen] = []
        self.error_dir = scratch_folder("errors")
        self.board = create_board(self.error_dir, world.local_world_size)
        self._signalled: int | None = None
        self._signalled_at = 0.0
        self._forced: str | None = None  # 'signal' or 'grace': why every rank was killed
        self._noted_saved = False  # said that a stop signal after the save changes nothing

    def run(self) -> tuple[int, bool]:
        """Start, watch, tear down; returns (exit code, whether the failure was a port clash)."""
        try:
            return self._run()
        finally:
            shutil.rmtree(self.error_dir, ignore_errors=True)

    def _run(self) -> tuple[int, bool]:
        previous = {sig: signal.signal(sig, self._on_signal) for sig in STOP_SIGNALS}
        outcome: tuple[int, bool] | None = None
        try:
            failed = self._start_and_watch()
            outcome = self._report(failed) if failed is not None else self._ended()
            return outcome
        finally:
            if outcome is not None and outcome[0] == PREEMPTED_EXIT_CODE:
                ignore_stop_signals()  # this process exits 75 next, whatever is sent meanwhile
            else:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)

    def _start_and_watch(self) -> int | None:
        """Start every local rank, watch them to the end, stop what is left; returns the failed
        rank to blame, if any."""
        failed = None
        try:
            for local_rank in range(self.world.local_world_size):
                argv, env = build_rank_command(
                    local_rank, self.world, self.argv, dict(os.environ), self.error_dir
                )
                if self.restart:
                    env[RESTART_ENV] = str(self.restart)
                self.procs.append(subprocess.Popen(argv, env=env, preexec_fn=die_with_parent))
            if self.nodes is not None:
                self.nodes.ranks_status = self.ranks_status
            failed = self._watch()
            if failed is not None and self.nodes is not None:  # before the teardown: the
                self.node_lines = self._tell_nodes(failed)  # others may ask while it runs
        finally:
            self._stop_all()
            if self.nodes is not None:
                self.nodes.ranks_status = None
        return failed

    def _ended(self) -> tuple[int, bool]:
        """The job's exit code when no rank failed, said in one line unless it is 0."""
        if self.stopped_for:
            self.cause = f"the job failed on {self.stopped_for}"
            print(f"trainkit: {self.cause}; stopped this node's ranks", file=sys.stderr, flush=True)
            return 1, False
        codes = [proc.returncode for proc in self.procs]
        name = signal.Signals(self._signalled).name if self._signalled else ""
        if self._forced and self._signalled is not None:  # forced by a signal
            why = (
                f"second {name}"
                if self._forced == "signal"
                else f"ranks still running {stop_grace():g} s after {name} ({STOP_GRACE_ENV})"
            )
            print(f"trainkit: {why}: killed every rank at once", file=sys.stderr)
            return 128 + self._signalled, False
        if PREEMPTED_EXIT_CODE in codes or any(map(self._saved, range(len(self.procs)))):
            print(
                f"trainkit: preempted{f' ({name})' if name else ''}: every rank saved its state "
                "and stopped; run the same command with --ckpt_path last to resume",
                file=sys.stderr,
            )
            return PREEMPTED_EXIT_CODE, False
        if self._signalled is not None and -self._signalled in codes:
            print(
                f"trainkit: {name} arrived while the ranks were starting, before they could save "
                "a checkpoint; stopped every rank (nothing to resume from this run)",
                file=sys.stderr,
            )
            return 128 + self._signalled, False
        if self._signalled is not None and any(codes):
            print(f"trainkit: stopped all ranks on {name}", file=sys.stderr)
            return 128 + self._signalled, False
        return 0, False

    @property
    def stopped_by_signal(self) -> bool:
        """Whether a stop signal reached the launcher during this attempt."""
        return self._signalled is not None

    def _on_signal(self, signum: int, frame: FrameType | None) -> None:
        """First stop signal: pass it to every rank (they save and exit); a second one, a
        moment later, kills them all at once, unless every rank has saved by then (a scheduler
        repeating its SIGTERM, SLURM ending a job it requeues): then they finish exiting 75."""
        now = time.monotonic()
        if self._signalled is None:
            self._signalled, self._signalled_at = signum, now
            for proc in self.procs:
                if proc.poll() is None:
                    proc.send_signal(signum)
        elif self._every_rank_saved():
            if not self._noted_saved:
                self._noted_saved = True
                first = signal.Signals(self._signalled).name
                when = "again" if signum == self._signalled else f"after {first}"
                say_from_handler(
                    f"trainkit: {signal.Signals(signum).name} {when}; every rank has saved its "
                    "state, finishing the exit (75)"
                )
        elif now - self._signalled_at >= SAME_NOTICE_SECONDS and not self._forced:
            self._kill_all("signal")

    def _saved(self, local_rank: int) -> bool:
        """Whether the rank marked its stop's checkpoint as saved."""
        return saved_mark(self.error_dir, local_rank).exists()

    def _every_rank_saved(self) -> bool:
        """Whether each rank has saved its stop's checkpoint or already exited 0 or 75."""
        return bool(self.procs) and all(
            self._saved(rank) or proc.poll() in (0, PREEMPTED_EXIT_CODE)
            for rank, proc in enumerate(self.procs)
        )

    def _kill_all(self, why: str) -> None:
        alive = [proc for proc in self.procs if proc.poll() is None]
        if alive:  # none left: nothing was forced
            self._forced = why
        for proc in alive:
            proc.kill()

    def _watch(self) -> int | None:
        """Wait until every rank has exited; return the failed rank to blame, if any. A rank that
        saved and stopped on a stop signal (PREEMPTED_EXIT_CODE) is no failure."""
        while True:
            codes = [proc.poll() for proc in self.procs]
            failed = self._failed_ranks()
            if failed and not self._forced:
                time.sleep(POLL_SECONDS)  # let near-simultaneous failures land to find the first
                failed = self._await_the_cause(failed)
                returncodes = [proc.returncode for proc in self.procs]
                errors = {rank: self._error(rank) for rank in range(len(self.procs))}
                first = root_cause(failed, returncodes, errors)
                # a rank that raised may still be exiting; its own exit code is the one to report
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.procs[first].wait(timeout=EXITING_SECONDS)
                return first
            if all(code is not None for code in codes):
                return None
            if self.nodes is not None and self.nodes.failed_elsewhere and not self._forced:
                self.stopped_for = self.nodes.failed_elsewhere
                return None
            if (
                self._signalled is not None
                and not self._forced
                and time.monotonic() - self._signalled_at > stop_grace()
            ):
                self._kill_all("grace")
            time.sleep(POLL_SECONDS)

    def _failed_ranks(self) -> list[int]:
        """The ranks that ended in a failure so far. A rank ended by the stop signal we forwarded
        (before it could catch it), or by any stop signal once it saved, is no failure."""
        stopped = -self._signalled if self._signalled is not None else None
        return [
            rank
            for rank, proc in enumerate(self.procs)
            if (code := proc.poll()) not in (None, 0, PREEMPTED_EXIT_CODE, stopped)
            and not (-code in STOP_SIGNALS and self._saved(rank))
        ]

    def _await_the_cause(self, failed: list[int]) -> list[int]:
        """When every rank that failed so far only lost contact with a peer, the cause is a rank
        still on its way out (one that said its error in one line and exits 1, without an error
        file): give the others EXITING_SECONDS to end; returns the failed ranks then."""
        errors = [self._error(rank) for rank in failed]
        if not all(error and is_communication_error(error["traceback"]) for error in errors):
            return failed
        if any(error and is_collective_timeout(error["traceback"]) for error in errors):
            return failed  # a late rank: the board names it, waiting would not
        deadline = time.monotonic() + EXITING_SECONDS
        while time.monotonic() < deadline and any(p.poll() is None for p in self.procs):
            time.sleep(POLL_SECONDS)
        return self._failed_ranks()

    def _error(self, local_rank: int) -> dict[str, Any] | None:
        path = Path(self.error_dir) / f"rank{local_rank}.json"
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            return None

    def _stop_all(self) -> None:
        alive = [proc for proc in self.procs if proc.poll() is None]
        if alive:  # tells the ranks' stop-signal handlers to exit rather than save
            Path(self.error_dir, "abort").touch()
        for proc in alive:
            proc.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + GRACE_SECONDS
        for proc in alive:
            try:
                proc.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def positions(self) -> list[RankPosition]:
        """Where each local rank is (the board), with the ranks that raised a collective
        timeout marked as inside a collective, whatever phase the board shows for them."""
        positions = read_board(self.board, self.world.global_rank(0))
        for local_rank, position in enumerate(positions):
            error = self._error(local_rank)
            if error and is_collective_timeout(error["traceback"]):
                positions[local_rank] = dataclasses.replace(position, in_collective=True)
        return positions

    def ranks_status(self) -> list[dict[str, Any]]:
        """Where each local rank is and its exit code if it ended."""
        positions = self.positions()
        return [
            {**dataclasses.asdict(position), "exit": proc.poll()}
            for position, proc in zip(positions, self.procs)
        ]

    def _cause(self, local_rank: int) -> tuple[int, str, dict[str, Any] | None]:
        """The failed rank's exit code (1 when it raised), what happened to it, its error."""
        error = self._error(local_rank)
        code, what = how_it_ended(self.procs[local_rank].returncode, error)
        return code, what, error

    def _tell_nodes(self, local_rank: int) -> list[str]:
        """Tell this node's launcher among the others what failed here. Where the cause is here
        (a rank died, raised, or is late), the others will ask; where this node's ranks only
        lost contact or waited, ask the others and return what they said, in lines."""
        assert self.nodes is not None
        code, what, error = self._cause(local_rank)
        text = error["traceback"] if error else ""
        cause = f"rank {self.world.global_rank(local_rank)} {what}"
        cause += f" ({last_line_of(text)})" if error else ""
        positions = self.positions()
        timeout = bool(error) and is_collective_timeout(text)
        if timeout:
            # all at one point, or behind only inside a collective: the late rank is elsewhere
            local = bool(late_ranks(positions, other_nodes=True)[0]) and bool(behind(positions))
        else:
            local = not is_communication_error(text) and code != 128 + signal.SIGABRT
        self.nodes.record_failure(cause, self.ranks_status(), local)
        if local and not timeout:  # a timeout may also come from a node that is gone: ask
            return []
        answers = self.nodes.ask_others(cause)
        lines = timed_out(positions, answers) if timeout else lost_contact(answers)
        self.cause_elsewhere = "" if local or not lines else lines[0]
        return lines

    def _report(self, local_rank: int) -> tuple[int, bool]:
        code, what, error = self._cause(local_rank)
        rank = self.world.global_rank(local_rank)
        port_clash = False
        if error:
            text = error["traceback"].rstrip()
            port_clash = "EADDRINUSE" in text or "address already in use" in text.lower()
            print("\n".join(f"[rank {rank}] {line}" for line in text.splitlines()), file=sys.stderr)
        print(f"trainkit: rank {rank} {what}; stopped the other ranks", file=sys.stderr, flush=True)
        self.cause = self.cause_elsewhere or f"rank {rank} {what}" + (
            f" ({last_line_of(error['traceback'])})" if error else ""
        )
        late_named = any(line.startswith("a collective timed out") for line in self.node_lines)
        timeout = bool(error) and is_collective_timeout(error["traceback"] if error else "")
        if (timeout or code == 128 + signal.SIGABRT) and not late_named:
            explanation = explain(
                self.positions(),
                timed_out=code != 128 + signal.SIGABRT,
                other_nodes=self.world.num_nodes > 1,
            )
            print(f"trainkit: {explanation}", file=sys.stderr, flush=True)
        for line in self.node_lines:
            print(f"trainkit: {line}", file=sys.stderr, flush=True)
        return code, port_clash
