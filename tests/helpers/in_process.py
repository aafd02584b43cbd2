"""A trainkit command run through ``trainkit.cli.main`` in the test's own interpreter, with the
process-wide state a command may change (working folder, ``sys.argv``, ``sys.path``, the
environment, warning filters, signal handlers, torch's thread count and determinism, a process
group left up, modules imported from the run's folder) put back afterwards, so that the next
test sees none of it. A command that would end the interpreter (``os._exit``, as a rank that
joined a process group does) fails the test instead of ending pytest."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import NoReturn, TextIO

from tests.helpers.command_env import RANK_VARIABLES, REPO

# the signals a trainkit command may handle (stop signals, the requeue signal)
HANDLED_SIGNALS = tuple(
    getattr(signal, name)
    for name in ("SIGINT", "SIGTERM", "SIGUSR1", "SIGUSR2", "SIGHUP", "SIGCONT")
    if hasattr(signal, name)
)


@contextlib.contextmanager
def command_state(cwd: Path, env: dict[str, str] | None = None) -> Iterator[None]:
    """Run a command's body in ``cwd`` with ``env`` (default: this process's environment with
    no rank variables and the repository importable), then restore what it may have changed."""
    import torch

    saved_env = dict(os.environ)
    saved_cwd = os.getcwd()
    saved_argv, saved_path = sys.argv, list(sys.path)
    saved_hook = sys.excepthook
    saved_modules = set(sys.modules)
    saved_handlers = {sig: signal.getsignal(sig) for sig in HANDLED_SIGNALS}
    saved_threads = torch.get_num_threads()
    saved_deterministic = (
        torch.are_deterministic_algorithms_enabled(),
        torch.is_deterministic_algorithms_warn_only_enabled(),
    )
    if env is None:  # the ranks a command launches import the repository's modules too
        env = {key: value for key, value in os.environ.items() if key not in RANK_VARIABLES}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    sys.argv = ["trainkit"]
    leave_process_group()
    real_exit = os._exit
    os._exit = exit_refused(real_exit, os.getpid())
    if str(REPO) not in sys.path:
        sys.path.insert(0, str(REPO))
    try:
        with warnings.catch_warnings():  # filters and showwarning, as they were afterwards
            fresh_interpreter_warnings()
            yield
    finally:
        os._exit = real_exit
        leave_process_group()
        os.environ.clear()
        os.environ.update(saved_env)
        os.chdir(saved_cwd)
        sys.argv = saved_argv
        sys.path[:] = saved_path
        sys.excepthook = saved_hook
        for sig, handler in saved_handlers.items():
            if handler is not None:
                signal.signal(sig, handler)
        if torch.get_num_threads() != saved_threads:
            torch.set_num_threads(saved_threads)
        torch.use_deterministic_algorithms(saved_deterministic[0], warn_only=saved_deterministic[1])
        forget_modules_under(cwd, set(sys.modules) - saved_modules)


def fresh_interpreter_warnings() -> None:
    """Warnings as a new interpreter shows them: its default filters, printed to stderr (not
    recorded by pytest's warnings capture, which the command's own handler would pass them to)."""
    warnings.resetwarnings()
    for category in (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning):
        warnings.simplefilter("ignore", category)
    warnings.filterwarnings("default", category=DeprecationWarning, module="__main__")
    warnings.showwarning = print_warning


def print_warning(
    message: Warning | str,
    category: type[Warning],
    filename: str,
    lineno: int,
    file: TextIO | None = None,
    line: str | None = None,
) -> None:
    """``warnings.showwarning`` of a new interpreter: the formatted warning on stderr."""
    text = warnings.formatwarning(message, category, filename, lineno, line)
    (file or sys.stderr).write(text)


def exit_refused(real_exit: Callable[[int], NoReturn], pid: int) -> Callable[[int], NoReturn]:
    """``os._exit`` for the test's own process: an error naming the code (a forked child, such
    as a DataLoader worker, still ends as it should)."""

    def refuse(code: int) -> NoReturn:
        if os.getpid() != pid:
            real_exit(code)
        raise RuntimeError(f"the command ended the interpreter with os._exit({code})")

    return refuse


def leave_process_group() -> None:
    """Destroy a torch.distributed group a command (or an earlier test) left up: ``main`` ends
    a process that joined one without finalizing it."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def forget_modules_under(folder: Path, names: set[str]) -> None:
    """Drop the modules among ``names`` that were imported from ``folder`` (a user's model.py
    there must not answer for another test's model.py of the same name)."""
    root = folder.resolve()
    for name in names:
        module = sys.modules.get(name)
        where = getattr(module, "__file__", None)
        if where and Path(where).resolve().is_relative_to(root):
            del sys.modules[name]


def run_main(
    args: tuple[str, ...],
    cwd: Path,
    read_output: Callable[[], tuple[str, str]],
    env: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    """``trainkit ARGS`` through ``trainkit.cli.main`` in this interpreter; ``read_output``
    returns (and resets) what was written to stdout and stderr (pytest's capfd). The result
    reads as ``subprocess.run``'s: ``returncode``, ``stdout``, ``stderr``."""
    from trainkit.cli import main

    read_output()  # what came before is not the command's
    with command_state(cwd, env):
        code = main(list(args))
    out, err = read_output()
    return subprocess.CompletedProcess(["trainkit", *args], code, out, err)


def run_script(
    script: Path, args: tuple[str, ...], cwd: Path, env: dict[str, str], threads: int = 1
) -> int:
    """``python SCRIPT ARGS`` in this interpreter (``runpy``, as ``__main__``), in ``cwd`` with
    ``env`` and torch on ``threads`` intra-op threads; its exit code. The process-wide state
    is put back afterwards, as after ``run_main``."""
    import runpy

    import torch

    from trainkit.cli.command import exit_code

    with command_state(cwd, env):
        sys.argv = [str(script), *args]
        sys.path.insert(0, str(script.parent))
        torch.set_num_threads(threads)
        try:
            runpy.run_path(str(script), run_name="__main__")
        except SystemExit as stop:
            return exit_code(stop.code)
    return 0
