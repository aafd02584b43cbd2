"""What one local rank is started with (its argv and environment), and how long ranks get to stop
after a stop signal."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from contextvars import ContextVar
from pathlib import Path

from trainkit.distributed.rank_env import World, rank_env
from trainkit.distributed.signals import (
    ABORT_FILE_ENV,
    BOARD_ENV,
    DEFAULT_STOP_GRACE,
    ERROR_FILE_ENV,
    SAVED_FILE_ENV,
    STOP_GRACE_ENV,
)
from trainkit.errors import ConfigError

__all__ = ["RANK_COMMAND", "build_rank_command", "ranks_run", "saved_mark", "stop_grace"]


def build_rank_command(
    local_rank: int,
    world: World,
    argv: list[str],
    env: dict[str, str],
    error_dir: str | None = None,
) -> tuple[list[str], dict[str, str]]:
    """The argv and environment of one local rank (pure: no side effects)."""
    child_env = {**env, **rank_env(world, local_rank, env)}
    if error_dir is not None:
        child_env[ERROR_FILE_ENV] = str(Path(error_dir) / f"rank{local_rank}.json")
        child_env[ABORT_FILE_ENV] = str(Path(error_dir) / "abort")
        child_env[BOARD_ENV] = str(Path(error_dir) / "rank_board")
        child_env[SAVED_FILE_ENV] = str(saved_mark(error_dir, local_rank))
    return list(argv), child_env


def saved_mark(error_dir: str, local_rank: int) -> Path:
    """The file a rank creates once its stop's checkpoint is saved (``SAVED_FILE_ENV``)."""
    return Path(error_dir) / f"rank{local_rank}.saved"


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


# the command each rank runs when it is not this process's own: ``trainkit.cli.main(argv)``
# called from code runs ``python -m trainkit ARGV`` in its ranks
RANK_COMMAND: ContextVar[list[str] | None] = ContextVar("rank_command", default=None)


@contextlib.contextmanager
def ranks_run(command: list[str]) -> Iterator[None]:
    """Ranks started inside the block run ``command`` rather than this process's own argv."""
    token = RANK_COMMAND.set(command)
    try:
        yield
    finally:
        RANK_COMMAND.reset(token)
