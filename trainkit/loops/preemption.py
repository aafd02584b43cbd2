"""Preemption: SIGTERM, SIGINT or SIGUSR1 during fit make every rank finish its step, save a
resumable checkpoint once, and exit with PREEMPTED_EXIT_CODE; a later second signal exits at once."""

from __future__ import annotations

import math
import signal
import sys
import time
from collections.abc import Callable
from typing import Any

from trainkit.distributed.signals import StopSignals
from trainkit.state import RunState

AGREE_EVERY_SECONDS = 0.05  # how often ranks compare stop flags, at most
MAX_GAP = 1000  # batches between two rounds, at most


def proposed_gaps(seconds_per_batch: float, round_seconds: float) -> tuple[int, int]:
    """One rank's two proposals for the batches until the next round: about AGREE_EVERY_SECONDS
    of its batches (the smallest wins), and enough batches to cover twice the last round's
    latency when reading it had to wait (the largest wins), so a round is read when it is done
    even where an all-reduce over many ranks takes longer than AGREE_EVERY_SECONDS."""
    per_batch = max(seconds_per_batch, 1e-6)
    often = max(1, min(MAX_GAP, int(AGREE_EVERY_SECONDS / per_batch)))
    covering = min(MAX_GAP, math.ceil(2 * round_seconds / per_batch)) if round_seconds > 0 else 0
    return often, covering


class Preemption:
    """Watches for stop signals during fit and decides, identically on every rank, when to stop.

    Distributed runs agree through a small all-reduce (MAX of the local flags) on a dedicated gloo
    group, started after one batch and read a few batches later, so it never blocks a step.
    """

    def __init__(
        self, state: RunState, save_checkpoint: Callable[[str], None], checkpoint_path: str
    ) -> None:
        self.state = state
        self.save_checkpoint = save_checkpoint  # called on every rank; rank 0 writes
        self.checkpoint_path = checkpoint_path
        self.signals = StopSignals()
        self.installed = self.signals.install()
        self._pending = False
        self._work: Any = None
        self._round: Any = None
        self._retired: tuple[Any, Any] | None = None
        self._gap = 1
        self._round_seconds = 0.0  # how long the last round took, when reading it had to wait
        self._group: Any = None
        self._batches = self._round_batch = self._next_round = 0
        self._round_started = time.perf_counter()
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
            self._group = dist.new_group(backend="gloo")

    def should_stop(self, can_stop: bool) -> bool:
        """Called after every training batch on every rank; ``can_stop`` is False mid-accumulation."""
        if self._group is None:
            self._pending = self._pending or self.signals.received is not None
            return self._pending and can_stop
        self._batches += 1
        if self._batches >= self._next_round:
            self._agree()
        return self._pending and can_stop

    def _agree(self) -> None:
        """Read the last round (every rank gets the same result), then start the next one.

        A round carries the stop flag and each rank's proposed gaps to the next round
        (``proposed_gaps``), so rounds stay cheap for tiny steps, happen after every batch for
        slow ones, never wait on a slow all-reduce for long, and fall on the same batches on
        every rank.
        """
        import torch
        import torch.distributed as dist

        self.settle()
        now = time.perf_counter()
        seconds_per_batch = (now - self._round_started) / max(1, self._batches - self._round_batch)
        often, covering = proposed_gaps(seconds_per_batch, self._round_seconds)
        self._round_started, self._round_batch = now, self._batches
        flag = 0 if self.signals.received is None else 1
        self._round = torch.tensor([flag, -often, covering], dtype=torch.int64)
        self._work = dist.all_reduce(
            self._round, op=dist.ReduceOp.MAX, group=self._group, async_op=True
        )
        self._next_round = self._batches + self._gap

    def settle(self) -> None:
        """Wait for the round in flight and take its result; every rank calls this at the same
        batch (in every round, and before the loops fork DataLoader workers)."""
        if self._work is None:
            return
        if self._work.is_completed():
            self._round_seconds = 0.0
        else:
            self._work.wait()
            self._round_seconds = time.perf_counter() - self._round_started
        flag, negative_often, covering = self._round.tolist()
        self._pending = self._pending or flag > 0
        self._gap = max(-negative_often, covering)
        # Held until the next round is read: the gloo thread that ran this one may still hold it
        # for a moment, and must not be the one that frees its tensor (see fork_safety).
        self._retired = (self._work, self._round)
        self._work = self._round = None

    def save_and_stop(self) -> None:
        """Write the resumable checkpoint (every rank calls; rank 0 writes) and end the fit."""
        state = self.state
        signum = self.signals.received
        name = signal.Signals(signum).name if signum is not None else "a peer's stop signal"
        path = self.checkpoint_path
        self.save_checkpoint(path)
        # written (or being written in the background; fit's end waits for it): a later stop
        # signal lets the exit with 75 go on instead of killing the process
        self.signals.saved = True
        state.stop.preempted = name
        if state.strategy.is_global_zero:
            position = state.position
            print(
                f"trainkit: preempted ({name}) at epoch {position.epoch}, step "
                f"{position.global_step}; saved {path}; resume with --ckpt_path last",
                file=sys.stderr,
                flush=True,
            )

    def close(self, settle: bool = True) -> None:
        """Restore the previous handlers; ``settle`` waits for the last agreement round (every
        rank started one), which a failed fit skips since its peers may be gone."""
        if self.installed:
            self.signals.uninstall()
        if settle:
            self.settle()
        self._work = self._round = None


def run_watching_stop_signals(
    state: RunState,
    run: Callable[[], None],
    save_checkpoint: Callable[[str], None],
    checkpoint_path: str,
) -> None:
    """``run()`` (the fit loop) with a Preemption in ``state.preemption``; it is closed after,
    without waiting for peers when ``run`` failed (they may be gone)."""
    state.stop.preempted = None
    preemption = state.preemption = Preemption(state, save_checkpoint, checkpoint_path)
    try:
        run()
    except BaseException:
        preemption.close(settle=False)
        raise
    finally:
        state.preemption = None
    preemption.close()
