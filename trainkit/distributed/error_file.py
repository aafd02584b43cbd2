"""A rank's uncaught exception: written where trainkit's launcher reads it, or, under an external
launcher (srun, torchrun, mpirun), printed with a one-line cause that says which rank failed
and which errors only followed from another rank's failure."""

from __future__ import annotations

import atexit
import json
import os
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from types import TracebackType

from trainkit.distributed.signals import ERROR_FILE_ENV

# the global rank and world size, as each launcher names them (trainkit and torchrun, mpirun,
# srun, mpiexec, horovodrun)
RANK_VARIABLES = ("RANK", "OMPI_COMM_WORLD_RANK", "SLURM_PROCID", "PMI_RANK", "HOROVOD_RANK")
ExceptHook = Callable[[type[BaseException], BaseException, TracebackType | None], None]
WORLD_VARIABLES = ("WORLD_SIZE", "OMPI_COMM_WORLD_SIZE", "SLURM_NTASKS", "PMI_SIZE", "HOROVOD_SIZE")
CLEAN_EXITS: list[Callable[[], None]] = []  # at_clean_exit's, run by finish_rank


def install_error_file_hook() -> None:
    """In a rank: report an uncaught exception to trainkit's launcher (its error file) or, with
    several ranks started by someone else, on stderr with the one-line cause."""
    path = os.environ.get(ERROR_FILE_ENV)
    if path:
        sys.excepthook = _file_hook(path, os.environ.get("RANK", "?"))
        return
    rank, world = _first_int(RANK_VARIABLES), _first_int(WORLD_VARIABLES)
    if rank is not None and world is not None and world > 1:
        sys.excepthook = _cause_hook(rank)


def _first_int(names: tuple[str, ...]) -> int | None:
    for name in names:
        value = os.environ.get(name, "")
        if value.isdigit():
            return int(value)
    return None


def _file_hook(path: str, rank: str) -> ExceptHook:
    def hook(kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
        text = "".join(traceback.format_exception(kind, value, tb))
        record = json.dumps({"rank": rank, "time": time.time(), "traceback": text})
        partial = f"{path}.partial"
        Path(partial).write_text(record)
        os.replace(partial, path)  # the launcher never reads half a record
        leave_failed()

    return hook


def last_line(value: BaseException) -> str:
    """``Type: message`` (first line of the message), as a traceback ends."""
    message = str(value).strip().splitlines()
    return f"{type(value).__name__}: {message[0]}" if message else type(value).__name__


def _cause_hook(rank: int) -> ExceptHook:
    def hook(kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
        cause = last_line(value)
        if is_communication_error(cause):
            sys.stderr.write(
                f"trainkit: rank {rank}: follow-on error, not the cause: lost contact with a "
                f"peer rank, which most likely failed first (see its error) [{cause}]\n"
            )
        else:
            traceback.print_exception(kind, value, tb)
            sys.stderr.write(f"trainkit: rank {rank} failed: {cause}\n")
        sys.stderr.flush()
        leave_failed()

    return hook


def leave_failed() -> None:
    """After the report: end with exit code 1, as Python does after an uncaught exception, but
    skip interpreter finalization while a process group is up. There, destroying the gloo group
    whose peers still wait in a collective can abort the process ("terminate called without an
    active exception", SIGABRT) and the scheduler records a crash instead of the failure. The exit
    waits for the end of the excepthook chain (torch's prefixes and prints what this hook wrote):
    an exit function registered now runs first (last in, first out)."""
    if process_group_is_up():
        atexit.register(exit_without_finalizing, 1)


def process_group_is_up() -> bool:
    """Whether this process has joined a torch.distributed group (without importing torch)."""
    torch = sys.modules.get("torch")
    return (
        torch is not None
        and torch.distributed.is_available()
        and torch.distributed.is_initialized()
    )


def launcher_rank() -> int | None:
    """The global rank the launcher that started this process gave it (None: not a rank)."""
    return _first_int(RANK_VARIABLES)


def at_clean_exit(leave: Callable[[], None]) -> None:
    """Run ``leave`` when this rank's run ends well, after the process group is gone and before
    the process exits without finalization: what a library would have closed in finalization
    (horovod's MPI, which mpirun otherwise reports as an improper exit)."""
    if leave not in CLEAN_EXITS:
        CLEAN_EXITS.append(leave)


def run_clean_exits() -> None:
    """The ``at_clean_exit`` functions, last registered first."""
    while CLEAN_EXITS:
        CLEAN_EXITS.pop()()


def exit_without_finalizing(code: int) -> None:
    """Flush the output and end the process without finalization."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def is_communication_error(traceback_text: str) -> bool:
    """Whether an exception came from the link between ranks rather than the program."""
    last = traceback_text.strip().splitlines()[-1].lower() if traceback_text.strip() else ""
    markers = ("gloo", "nccl", "connection", "broken pipe", "socket")
    return any(marker in last for marker in markers) or is_collective_timeout(last)


def is_collective_timeout(traceback_text: str) -> bool:
    text = traceback_text.lower()
    return "timed out" in text or "timeout" in text or "distbackenderror" in text


def last_line_of(traceback_text: str) -> str:
    """The ``Type: message`` line a formatted traceback ends with."""
    lines = traceback_text.strip().splitlines()
    return lines[-1].strip() if lines else ""
