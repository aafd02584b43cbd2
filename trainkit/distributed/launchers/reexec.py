"""Start one process per local rank with the same command, watch them, tear all down on failure.

The launching process is a pure watcher: it trains nothing itself, so a crashed rank 0 is seen
and reported like any other rank.
"""

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
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any, NoReturn, Protocol

from trainkit.distributed.env import NodePlacement
from trainkit.distributed.error_file import (
    is_collective_timeout,
    is_communication_error,
    last_line_of,
)
from trainkit.distributed.launchers.hydra import hydra_rank_command
from trainkit.distributed.ports import check_port_free, find_free_port
from trainkit.distributed.rank_board import create_board, explain, read_board
from trainkit.distributed.rank_env import World, rank_env
from trainkit.distributed.restarts import Restarts
from trainkit.distributed.scratch import scratch_folder
from trainkit.distributed.signals import (
    ABORT_FILE_ENV,
    BOARD_ENV,
    DEFAULT_STOP_GRACE,
    ERROR_FILE_ENV,
    PREEMPTED_EXIT_CODE,
    RESTART_ENV,
    SAME_NOTICE_SECONDS,
    STOP_GRACE_ENV,
    STOP_SIGNALS,
    die_with_parent,
    held_stop_signal,
)
from trainkit.errors import ConfigError

GRACE_SECONDS = 3.0
POLL_SECONDS = 0.05
EXITING_SECONDS = 1.0  # how long a rank that raised gets to exit by itself once blamed
PORT_RETRIES = 3


def current_command() -> list[str]:
    """The argv that re-runs this process: ``python script.py ...`` or ``python -m pkg ...``."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if spec is not None and spec.name and spec.name != "__main__":
        module = spec.name.removesuffix(".__main__")
        return [sys.executable, "-m", module, *sys.argv[1:]]
    script = sys.argv[0] if sys.argv else ""
    if script and script not in ("-c", "-") and Path(script).is_file():
        return [sys.executable, script, *sys.argv[1:]]
    raise RuntimeError(
        "this Python session cannot be re-executed per rank (interactive or `python -c`); "
        "use strategy='ddp_spawn', or run a script file"
    )


def can_reexecute() -> bool:
    """Whether this process was started from a file or module that children can run again."""
    try:
        current_command()
    except RuntimeError:
        return False
    return True


def build_rank_command(
    local_rank: int,
    world: World,
    argv: list[str],
    env: dict[str, str],
    error_dir: str | None = None,
) -> tuple[list[str], dict[str, str]]:
    """The argv and environment of one local rank (pure: no side effects)."""
    child_env = {**env, **rank_env(world, local_rank)}
    if error_dir is not None:
        child_env[ERROR_FILE_ENV] = str(Path(error_dir) / f"rank{local_rank}.json")
        child_env[ABORT_FILE_ENV] = str(Path(error_dir) / "abort")
        child_env[BOARD_ENV] = str(Path(error_dir) / "rank_board")
    return list(argv), child_env


def stop_grace() -> float:
    """Seconds ranks get, after a stop signal, to finish the step, save and exit."""
    value = os.environ.get(STOP_GRACE_ENV)
    if not value:
        return DEFAULT_STOP_GRACE
    try:
        grace = float(value)
    except ValueError:
        grace = -1.0
    if not grace > 0:
        raise ConfigError(STOP_GRACE_ENV, value, "seconds > 0", "unset it for 120")
    return grace


class RankCounts(Protocol):
    """What the launcher reads of the strategy it starts ranks for (``Strategy``'s members)."""

    @property
    def processes_per_node(self) -> int: ...
    @property
    def num_nodes(self) -> int: ...


class ReexecLauncher:
    """Re-runs this process's command once per local rank and watches them. The launching
    process is a pure watcher: ``launch`` never returns, it exits with the job's code (``fn``
    runs in the ranks, which reach the same call with their ranks set and launch nothing).
    A failed job starts again, every rank from the newest checkpoint, up to ``max_restarts``
    times."""

    def __init__(self, strategy: RankCounts, node: NodePlacement, max_restarts: int = 0) -> None:
        self.strategy = strategy
        self.node = node  # checked when the strategy chose this launcher
        self.max_restarts = max_restarts

    def launch(self, fn: Callable[..., Any] | None = None, *args: object) -> NoReturn:
        """Never returns: this process only watches the ranks it starts and ends with the
        job's exit code; ``fn`` runs in the re-executed ranks when they reach the same call."""
        raise SystemExit(launch_ranks(self.strategy, self.node, self.max_restarts))


def launch_ranks(strategy: RankCounts, node: NodePlacement, max_restarts: int = 0) -> int:
    """Run every local rank of this node (again after a failure, while restarts are left);
    return the job's exit code."""
    node_rank, address, env_port = node
    world = World(
        local_world_size=strategy.processes_per_node,
        num_nodes=strategy.num_nodes,
        node_rank=node_rank,
        main_address=address,
        main_port=int(env_port) if env_port else find_free_port(),
    )
    argv = hydra_rank_command() or current_command()  # a Hydra app's ranks share its run folder
    stop_grace()  # a bad value fails here, before any rank starts
    if env_port and world.node_rank == 0:
        check_port_free(world.main_address, world.main_port)
    restarts = Restarts(max_restarts)
    while True:
        held = held_stop_signal()
        if held is not None:
            print(
                f"trainkit: {signal.Signals(held).name} arrived before the ranks started; "
                "stopped before training (nothing to save); run the same command to start again",
                file=sys.stderr,
                flush=True,
            )
            return PREEMPTED_EXIT_CODE
        code, group = run_attempt(world, argv, bool(env_port), restarts.count)
        if not restarts.should_restart(code, group.stopped_by_signal, group.cause):
            return code
        if not env_port:
            world = dataclasses.replace(world, main_port=find_free_port())


def run_attempt(
    world: World, argv: list[str], port_fixed: bool, restart: int
) -> tuple[int, RankGroup]:
    """One start of every local rank, again on a fresh port when rank 0 found its port taken."""
    for _attempt in range(PORT_RETRIES):
        group = RankGroup(world, argv, restart)
        code, port_clash = group.run()
        if not port_clash or port_fixed:
            break
        world = dataclasses.replace(world, main_port=find_free_port())
    return code, group


class RankGroup:
    """The child processes of one launch attempt and the logic that watches them."""

    def __init__(self, world: World, argv: list[str], restart: int = 0) -> None:
        self.world = world
        self.argv = argv
        self.restart = restart  # how many times the job was started again before this attempt
        self.cause = ""  # after a failure: which rank failed and why, in one line
        self.procs: list[subprocess.Popen] = []
        self.error_dir = scratch_folder("errors")
        self.board = create_board(self.error_dir, world.local_world_size)
        self._signalled: int | None = None
        self._signalled_at = 0.0
        self._forced: str | None = None  # 'signal' or 'grace': why every rank was killed

    def run(self) -> tuple[int, bool]:
        """Start, watch, tear down; returns (exit code, whether the failure was a port clash)."""
        try:
            return self._run()
        finally:
            shutil.rmtree(self.error_dir, ignore_errors=True)

    def _run(self) -> tuple[int, bool]:
        previous = {sig: signal.signal(sig, self._on_signal) for sig in STOP_SIGNALS}
        try:
            for local_rank in range(self.world.local_world_size):
                argv, env = build_rank_command(
                    local_rank, self.world, self.argv, dict(os.environ), self.error_dir
                )
                if self.restart:
                    env[RESTART_ENV] = str(self.restart)
                self.procs.append(subprocess.Popen(argv, env=env, preexec_fn=die_with_parent))
            failed = self._watch()
        finally:
            self._stop_all()
            for sig, handler in previous.items():
                signal.signal(sig, handler)
        if failed is not None:
            return self._report(failed)
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
        if PREEMPTED_EXIT_CODE in codes:
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
        moment later, kills them all at once."""
        now = time.monotonic()
        if self._signalled is None:
            self._signalled, self._signalled_at = signum, now
            for proc in self.procs:
                if proc.poll() is None:
                    proc.send_signal(signum)
        elif now - self._signalled_at >= SAME_NOTICE_SECONDS and not self._forced:
            self._kill_all("signal")

    def _kill_all(self, why: str) -> None:
        self._forced = why
        for proc in self.procs:
            if proc.poll() is None:
                proc.kill()

    def _watch(self) -> int | None:
        """Wait until every rank has exited; return the failed rank to blame, if any. A rank that
        saved and stopped on a stop signal (PREEMPTED_EXIT_CODE) is no failure."""
        while True:
            codes = [proc.poll() for proc in self.procs]
            # a rank ended by the stop signal we forwarded (before it could catch it) is no failure
            stopped = -self._signalled if self._signalled is not None else None
            failed = [
                rank
                for rank, code in enumerate(codes)
                if code not in (None, 0, PREEMPTED_EXIT_CODE, stopped)
            ]
            if failed and not self._forced:
                time.sleep(POLL_SECONDS)  # let near-simultaneous failures land to find the first
                first = self._first_failure(failed)
                # a rank that raised may still be exiting; its own exit code is the one to report
                with contextlib.suppress(subprocess.TimeoutExpired):
                    self.procs[first].wait(timeout=EXITING_SECONDS)
                return first
            if all(code is not None for code in codes):
                return None
            if (
                self._signalled is not None
                and not self._forced
                and time.monotonic() - self._signalled_at > stop_grace()
            ):
                self._kill_all("grace")
            time.sleep(POLL_SECONDS)

    def _first_failure(self, failed: list[int]) -> int:
        """The root cause, in this order: a rank that ended without an exception (killed,
        ``os._exit``); the earliest exception of the program itself; an interpreter aborted by the
        backend (SIGABRT: gloo found a mismatched collective); the earliest collective timeout (a
        late rank; the peers it leaves behind when it exits see their connections close, often
        before its own error is recorded); the earliest other communication error, which follows
        from any of those. A rank that raised counts while it is still exiting: a peer may abort
        before it is gone."""
        errors = {rank: self._error(rank) for rank in range(len(self.procs))}
        aborted = [
            rank
            for rank in failed
            if errors[rank] is None and self.procs[rank].returncode == -signal.SIGABRT
        ]
        silent = [rank for rank in failed if errors[rank] is None and rank not in aborted]
        reports = {rank: error for rank, error in errors.items() if error}
        raised = sorted(reports, key=lambda r: reports[r]["time"])
        own = [rank for rank in raised if not is_communication_error(reports[rank]["traceback"])]
        timeouts = [
            rank
            for rank in raised
            if is_collective_timeout(last_line_of(reports[rank]["traceback"]))
        ]
        for candidates in (silent, own, aborted, timeouts, raised, failed):
            if candidates:
                return candidates[0]
        raise AssertionError("no failed rank")  # _watch passes at least one

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

    def _report(self, local_rank: int) -> tuple[int, bool]:
        code = self.procs[local_rank].returncode
        rank = self.world.global_rank(local_rank)
        error = self._error(local_rank)
        port_clash = False
        if error:
            text = error["traceback"].rstrip()
            port_clash = "EADDRINUSE" in text or "address already in use" in text.lower()
            print("\n".join(f"[rank {rank}] {line}" for line in text.splitlines()), file=sys.stderr)
        if error and code <= 0:  # it raised, then was stopped or aborted on its way out
            code = 1
        if code < 0:
            what = f"was killed by {signal.Signals(-code).name}"
            code = 128 - code
        else:
            what = f"failed with exit code {code}"
        print(f"trainkit: rank {rank} {what}; stopped the other ranks", file=sys.stderr, flush=True)
        self.cause = f"rank {rank} {what}" + (
            f" ({last_line_of(error['traceback'])})" if error else ""
        )
        if (error and is_collective_timeout(error["traceback"])) or code == 128 + signal.SIGABRT:
            first = self.world.global_rank(0)
            explanation = explain(
                read_board(self.board, first),
                timed_out=code != 128 + signal.SIGABRT,
                other_nodes=self.world.num_nodes > 1,
            )
            print(f"trainkit: {explanation}", file=sys.stderr, flush=True)
        return code, port_clash
