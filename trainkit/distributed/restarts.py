"""Restarts that resume exactly: trainkit's launcher starts a failed job's ranks again
(``max_restarts``), and any restarted job (trainkit's, torchrun's ``--max-restarts``, a SLURM
requeue) resumes fit from its newest ``last.ckpt`` unless told otherwise."""

from __future__ import annotations

import os
import sys
import time
from typing import TYPE_CHECKING

from trainkit.distributed.signals import PREEMPTED_EXIT_CODE, RESTART_ENV, held_stop_signal
from trainkit.errors import ConfigError

if TYPE_CHECKING:
    from trainkit.distributed.environments import ClusterEnvironment

RESUME_ENV = "TRAINKIT_AUTO_RESUME"  # "0": a restarted job starts over instead of resuming
BACKOFF_SECONDS = 1.0  # before the first restart; doubles each time, at most MAX_BACKOFF
MAX_BACKOFF = 30.0
WAIT_STEP = 0.05


def check_max_restarts(value: object) -> int:
    """``max_restarts``: an int >= 0, or a one-line error."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(
            "trainer.max_restarts",
            value,
            "an int >= 0 (how often trainkit's launcher starts failed ranks again)",
            "0 turns restarts off",
        )
    return value


def say_restarts_are_the_launchers(
    cluster: ClusterEnvironment, max_restarts: int, is_global_zero: bool
) -> None:
    """``max_restarts`` under torchrun, srun (a task per rank), mpirun or a PyTorchJob, which
    started the ranks: trainkit restarts nothing there; said once, on rank 0, instead of
    silently (``cluster.restarted_by`` says who does; trainkit's own ranks say nothing)."""
    who = cluster.restarted_by
    if not max_restarts or not who or not is_global_zero:
        return
    print(
        f"trainkit: max_restarts {max_restarts} is not used under {cluster.name}, which started "
        f"the ranks: {who}; a restarted job resumes from last.ckpt by itself",
        file=sys.stderr,
        flush=True,
    )


def restart_count() -> tuple[int, str]:
    """How often this job was restarted and by whom (trainkit's launcher, torchrun, a SLURM
    requeue); ``(0, "")`` on a first run."""
    for variable, who in (
        (RESTART_ENV, "trainkit max_restarts"),
        ("TORCHELASTIC_RESTART_COUNT", "torchrun --max-restarts"),
        ("SLURM_RESTART_COUNT", "SLURM requeue"),
    ):
        value = os.environ.get(variable, "")
        if value.isdigit() and int(value) > 0:
            return int(value), who
    return 0, ""


def restart_checkpoint(ckpt_path: str | None, root: str, is_global_zero: bool) -> str | None:
    """The checkpoint fit starts from: ``ckpt_path`` when given; in a restarted job, 'last' when
    a last.ckpt exists under ``root`` (``TRAINKIT_AUTO_RESUME=0`` turns that off)."""
    if ckpt_path is not None or os.environ.get(RESUME_ENV, "1") == "0":
        return ckpt_path
    count, who = restart_count()
    if not count:
        return None
    from trainkit.checkpoint.files import find_checkpoint

    found = find_checkpoint(root)
    if is_global_zero:
        what = (
            f"resuming from {found}" if found else f"no last.ckpt under {root} yet; starting over"
        )
        print(f"trainkit: restart {count} ({who}): {what}", file=sys.stderr, flush=True)
    return "last" if found else None


class Restarts:
    """The restart budget of one launch: whether a failed attempt is started again, and when."""

    def __init__(self, max_restarts: int, first_backoff_s: float = BACKOFF_SECONDS) -> None:
        self.max_restarts = max_restarts
        self.first_backoff_s = first_backoff_s  # doubles with each restart, at most MAX_BACKOFF
        self.count = 0

    def should_restart(self, code: int, stopped_by_signal: bool, cause: str) -> bool:
        """After an attempt ended with ``code``: start the ranks again? (never after success, a
        preemption or a stop signal; only while restarts are left). Says why either way."""
        if code in (0, PREEMPTED_EXIT_CODE) or stopped_by_signal or self.max_restarts == 0:
            return False
        if self.count >= self.max_restarts:
            print(
                f"trainkit: {cause}; no restarts left (max_restarts {self.max_restarts})",
                file=sys.stderr,
                flush=True,
            )
            return False
        self.count += 1
        delay = self.backoff()
        print(
            f"trainkit: {cause}; restart {self.count} of {self.max_restarts} in {delay:g} s: "
            "every rank starts again from the newest last.ckpt",
            file=sys.stderr,
            flush=True,
        )
        return self.wait(delay)

    def backoff(self) -> float:
        return min(MAX_BACKOFF, self.first_backoff_s * 2 ** (self.count - 1))

    @staticmethod
    def wait(seconds: float) -> bool:
        """Sleep ``seconds``; False when a stop signal arrived meanwhile (then no restart)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if held_stop_signal() is not None:
                return False
            time.sleep(WAIT_STEP)
        return held_stop_signal() is None
