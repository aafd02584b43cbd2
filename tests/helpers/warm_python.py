"""``python -m trainkit`` for the tests without importing torch again every time.

Every trainkit command a test starts used to be a new interpreter that imported torch (about
1.6 s of CPU with torch._dynamo, most of a short command's cost). Here each pytest worker keeps
one *warm* interpreter that imported torch once and forks a child per command; the child takes
the command's stdin/stdout/stderr, working folder, environment, ``sys.path`` and ``sys.argv``
and runs ``trainkit`` as ``-m`` would, so that it is, from its first line, the process the
command would have started (its ranks, if it launches any, are new interpreters as always).
PyTorch supports being forked after import (the DataLoader's workers are).

The installed console script (``.venv/bin/trainkit ARGS``, as the README's commands type it) and
``python FILE.py ARGS`` (the compatibility corpus's programs) are served the same way: the child
runs the file's code as ``__main__``, as a new interpreter would, so a launcher in it
re-executes the file for its ranks.

``WarmPopen`` is a ``subprocess.Popen``: any other command, or one whose
environment differs from the warm interpreter's in anything read at import time (a rank
variable, the import allowlist, a ``PYTHON*`` setting other than the path, ...), is started
the ordinary way (as every command is with ``TESTS_WARM_PYTHON=0``); a command that sets
thread counts (``THREAD_KEYS``) starts from a warm interpreter started with them. The warm
interpreter reports each child's wait status, which ``poll`` and ``wait`` read instead of
``waitpid``.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import inspect
import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Mapping
from typing import Any, NamedTuple

from tests.helpers.command_env import cli_env

SWITCH = "TESTS_WARM_PYTHON"  # "0": every command a new interpreter (to compare, or to rule it out)
# keys whose value may differ from the warm interpreter's environment: read when the command
# runs, not when torch or trainkit is imported (in-process tests leave the inductor's behind)
RUNTIME_KEYS = (
    "MASTER_ADDR",
    "MASTER_PORT",
    "NODE_RANK",
    "PYTEST_CURRENT_TEST",
    "PYTHONPATH",
    SWITCH,
    "TORCHINDUCTOR_CACHE_DIR",
)
IMPORT_TIME_TRAINKIT_KEYS = ("TRAINKIT_IMPORT_ALLOWLIST",)
# thread counts, read at import, that a command may set and still start warm: from a warm
# interpreter of its own started with them (the compatibility corpus runs at one thread)
THREAD_KEYS = ("MKL_NUM_THREADS", "OMP_NUM_THREADS")
MESSAGE_BYTES = 1 << 20
# the arguments Popen passes to its _execute_child, by name, as this Python's subprocess has them
EXECUTE_CHILD_PARAMETERS = tuple(inspect.signature(subprocess.Popen._execute_child).parameters)[1:]  # type: ignore[attr-defined]


def differs_only_at_runtime(env: Mapping[str, str], base: Mapping[str, str]) -> bool:
    """Whether ``env`` differs from ``base`` only in variables read after start-up."""
    for key in {k for k in env.keys() | base.keys() if env.get(k) != base.get(k)}:
        trainkit_key = key.startswith("TRAINKIT_") and key not in IMPORT_TIME_TRAINKIT_KEYS
        if not (trainkit_key or key in RUNTIME_KEYS):
            return False
    return True


# --- the warm interpreter ---------------------------------------------------------------------


def serve(fd: int) -> None:
    """The warm interpreter's loop: import torch, then fork a child per request on ``fd``."""
    import selectors
    import signal

    import jsonargparse  # noqa: F401
    import torch
    import torch._dynamo  # noqa: F401

    import trainkit  # noqa: F401

    channel = socket.socket(fileno=fd)
    base_path = _base_sys_path()
    wakeup_read, wakeup_write = os.pipe()
    os.set_blocking(wakeup_write, False)
    signal.set_wakeup_fd(wakeup_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)
    selector = selectors.DefaultSelector()
    selector.register(channel, selectors.EVENT_READ)
    selector.register(wakeup_read, selectors.EVENT_READ)
    while True:
        for key, _ in selector.select():
            if key.fileobj is channel:
                try:
                    data, fds, _, _ = socket.recv_fds(channel, MESSAGE_BYTES, 3)
                except OSError:
                    data, fds = b"", []
                if not data:  # the worker is gone
                    return
                pid = os.fork()
                if pid == 0:
                    selector.close()
                    channel.close()
                    signal.set_wakeup_fd(-1)
                    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
                    os.close(wakeup_read)
                    os.close(wakeup_write)
                    _become(json.loads(data), fds, base_path)  # runs trainkit; never returns
                for handle in fds:
                    os.close(handle)
                channel.send(json.dumps({"started": pid}).encode())
            else:
                os.read(wakeup_read, 4096)
                _report_exits(channel)


def _report_exits(channel: socket.socket) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        channel.send(json.dumps({"exited": pid, "status": status}).encode())


def _base_sys_path() -> list[str]:
    """sys.path without what ``-c`` and PYTHONPATH put in front (each command has its own)."""
    from_env = {os.path.abspath(p) for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)}
    return [p for p in sys.path[1:] if p not in from_env]


def _become(request: dict[str, Any], fds: list[int], base_path: list[str]) -> None:
    """In the forked child: take the command's streams, folder, environment and arguments, and
    run ``python -m trainkit`` or the console script (interpreter exit ends the child as it ends
    any process)."""
    import importlib
    import random

    if request["new_session"]:
        os.setsid()
    if request["umask"] >= 0:
        os.umask(request["umask"])
    for target, handle in enumerate(fds):
        os.dup2(handle, target)
    for handle in fds:
        if handle > 2:
            os.close(handle)
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    python_path = os.environ.get("PYTHONPATH", "").split(os.pathsep)
    script = request["script"]
    # ``-m`` puts the working folder first; a script, the folder it really lies in
    first = os.getcwd() if script is None else os.path.dirname(os.path.realpath(script))
    sys.path[:] = [first, *(os.path.abspath(p) for p in python_path), *base_path]
    importlib.invalidate_caches()
    random.seed()  # a new interpreter seeds from the OS, as here
    if "numpy" in sys.modules:
        sys.modules["numpy"].random.seed()
    _reopen_standard_streams()
    try:
        if script is None:
            _run_trainkit_module(request["args"])
        else:
            _run_script(script, request["args"], request["executable"])
    except SystemExit:
        raise
    except BaseException as error:  # reported as the interpreter reports it: from runpy
        # (``-m``) or the script's first line on, without this file's frames
        trace = error.__traceback__
        while trace is not None and trace.tb_frame.f_code.co_filename == __file__:
            trace = trace.tb_next
        sys.excepthook(type(error), error, trace)
        if isinstance(error, KeyboardInterrupt):  # the interpreter ends by SIGINT, after exit
            import signal

            atexit._run_exitfuncs()  # type: ignore[attr-defined]
            sys.stdout.flush()
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
        raise SystemExit(1) from None
    sys.exit(0)


def _run_trainkit_module(args: list[str]) -> None:
    """``python -m trainkit ARGS``."""
    import runpy

    sys.argv = ["-m", *args]
    sys.orig_argv = [sys.executable, "-m", "trainkit", *args]
    runpy._run_module_as_main("trainkit")  # type: ignore[attr-defined]


def _run_script(script: str, args: list[str], executable: str) -> None:
    """``executable SCRIPT ARGS`` (``python FILE.py``, or the console script run by the
    interpreter its first line names): the file's code in ``__main__`` (no module spec),
    ``sys.argv[0]`` the script."""
    import builtins
    from importlib.machinery import SourceFileLoader

    with open(script, "rb") as file:
        source = file.read()
    sys.executable = executable
    sys.orig_argv = [executable, script, *args]
    sys.argv = [script, *args]
    main = sys.modules["__main__"].__dict__
    main.clear()
    main.update(
        __name__="__main__",
        __file__=script,
        __builtins__=builtins,
        __doc__=None,
        __spec__=None,
        __loader__=SourceFileLoader("__main__", script),
        __package__=None,
        __cached__=None,
    )
    exec(compile(source, script, "exec"), main)


class Entry(NamedTuple):
    """What a warm child runs: ``script`` (None: ``-m trainkit``) with ``args``, as a new
    ``executable`` would."""

    script: str | None
    args: list[str]
    executable: str


@functools.cache
def _console_entry() -> tuple[str, str] | None:
    """The installed ``trainkit`` console script beside this interpreter and the interpreter its
    first line names, where that is this one (read once: pip wrote it before the session)."""
    script = os.path.join(os.path.dirname(sys.executable), "trainkit")
    try:
        with open(script, "rb") as file:
            first = file.readline()
    except OSError:
        return None
    interpreter = first.removeprefix(b"#!").decode(errors="replace").strip()
    if not first.startswith(b"#!") or not os.path.isfile(interpreter):
        return None
    return (script, interpreter) if os.path.samefile(interpreter, sys.executable) else None


def console_script() -> str | None:
    """The installed ``trainkit`` console script, if the warm interpreter can stand in for the
    interpreter its first line names."""
    found = _console_entry()
    return found[0] if found else None


def warm_entry(command: list[str]) -> Entry | None:
    """What the warm interpreter runs for ``command``: ``python -m trainkit``, the console
    script, or ``python FILE.py`` (a program written for trainkit or Lightning); None for any
    other command."""
    words = [os.fspath(word) for word in command]
    if words[:3] == [sys.executable, "-m", "trainkit"]:
        return Entry(None, words[3:], sys.executable)
    console = _console_entry()
    if words and console is not None and words[0] == console[0]:
        return Entry(console[0], words[1:], console[1])
    python_file = len(words) > 1 and words[0] == sys.executable and words[1].endswith(".py")
    if python_file and os.path.isfile(words[1]):
        return Entry(words[1], words[2:], sys.executable)
    return None


def _reopen_standard_streams() -> None:
    """sys.stdin/stdout/stderr over fds 0-2 as the interpreter makes them at start-up."""
    import io

    unbuffered = bool(os.environ.get("PYTHONUNBUFFERED")) or bool(sys.flags.unbuffered)
    for name, fd in (("stdin", 0), ("stdout", 1), ("stderr", 2)):
        old = getattr(sys, name)
        reading = fd == 0
        raw = io.FileIO(fd, "r" if reading else "w", closefd=False)
        if reading:
            binary: io.RawIOBase | io.BufferedIOBase = io.BufferedReader(raw)
        else:
            binary = raw if unbuffered else io.BufferedWriter(raw)
        stream = io.TextIOWrapper(
            binary,  # type: ignore[arg-type]
            encoding=old.encoding,
            errors="backslashreplace" if fd == 2 else old.errors,
            line_buffering=not reading and not unbuffered and (fd == 2 or raw.isatty()),
            write_through=not reading and unbuffered,
        )
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)


# --- the pytest worker's side -----------------------------------------------------------------


class _WarmInterpreter:
    """One per pytest worker: the warm interpreter, its channel, and its children's statuses."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self.env = dict(env)
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        code = f"from {__name__} import serve; serve({theirs.fileno()})"
        self.process = subprocess.Popen(
            [sys.executable, "-c", code], env=self.env, pass_fds=[theirs.fileno()]
        )
        theirs.close()
        self.channel = ours
        self.requests = threading.Lock()
        self.changed = threading.Condition()
        self.started: list[int] = []
        self.statuses: dict[int, int] = {}
        self.commands: dict[int, list[str]] = {}
        threading.Thread(target=self._read, daemon=True, name="warm-python").start()

    def _read(self) -> None:
        while True:
            data = self.channel.recv(MESSAGE_BYTES)
            with self.changed:
                if not data:
                    self.started.append(-1)
                    self.changed.notify_all()
                    return
                message = json.loads(data)
                if "started" in message:
                    self.started.append(message["started"])
                    self.statuses.pop(message["started"], None)  # a reused pid's old status
                else:
                    self.statuses[message["exited"]] = message["status"]
                    self.commands.pop(message["exited"], None)
                self.changed.notify_all()

    def start(self, request: dict[str, Any], fds: list[int]) -> int:
        with self.requests:
            with self.changed:
                count = len(self.started)
            socket.send_fds(self.channel, [json.dumps(request).encode()], fds)
            with self.changed:
                self.changed.wait_for(lambda: len(self.started) > count)
                pid = self.started[count]
                if pid >= 0 and pid not in self.statuses:
                    self.commands[pid] = [request["script"] or "-m trainkit", *request["args"]]
        if pid < 0:
            raise RuntimeError("the warm interpreter ended (tests/helpers/warm_python.py)")
        return pid

    def status(self, pid: int, timeout: float | None) -> int | None:
        """The child's wait status once it has ended (None if it has not within ``timeout``)."""
        with self.changed:
            self.changed.wait_for(lambda: pid in self.statuses, timeout)
            return self.statuses.pop(pid, None)

    def running_mentioning(self, marker: str) -> list[int]:
        """Children still running whose command mentions ``marker``."""
        with self.changed:
            return [pid for pid, args in self.commands.items() if any(marker in a for a in args)]

    def close(self) -> None:
        """End the warm interpreter (its children, if any still run, go on)."""
        with contextlib.suppress(OSError):  # wakes the reader; the server reads EOF
            self.channel.shutdown(socket.SHUT_RDWR)
        self.channel.close()
        self.process.wait()


# this worker's warm interpreters: an in-process test may leave a variable behind in os.environ
# (mlflow does), after which a new one starts with the environment as it is then; the earlier
# ones stay to report on the commands they started
_interpreters: list[_WarmInterpreter] = []


def warm_interpreter(env: Mapping[str, str]) -> _WarmInterpreter | None:
    """The warm interpreter that can start a command with ``env``: one started with the
    worker's environment as it is now, plus the command's thread counts (``THREAD_KEYS``), if it
    sets them (started when first needed); None where ``env`` differs from that in anything
    else read at import (the command then starts anew)."""
    wanted = _warm_base_env()
    for key in THREAD_KEYS:
        if key in env:
            wanted[key] = env[key]
    if not differs_only_at_runtime(env, wanted):
        return None
    for warm in reversed(_interpreters):
        if differs_only_at_runtime(wanted, warm.env):
            return warm
    _interpreters.append(_WarmInterpreter(wanted))
    atexit.register(_interpreters[-1].close)
    return _interpreters[-1]


def running_mentioning(marker: str) -> list[int]:
    """Commands the warm interpreters started that still run and mention ``marker``."""
    return [pid for warm in _interpreters for pid in warm.running_mentioning(marker)]


class WarmPopen(subprocess.Popen):
    """``subprocess.Popen`` that starts ``python -m trainkit ...`` from the warm interpreter."""

    _warm_from: _WarmInterpreter | None = None

    @property
    def warm(self) -> bool:
        """Whether the warm interpreter started this command (else a new interpreter did)."""
        return self._warm_from is not None

    def _execute_child(self, *popen_args: Any) -> None:
        """Popen's start of the child (its arguments by name: ``EXECUTE_CHILD_PARAMETERS``)."""
        call = dict(zip(EXECUTE_CHILD_PARAMETERS, popen_args, strict=True))
        env = dict(os.environ if call["env"] is None else call["env"])
        command = call["args"] if isinstance(call["args"], (list, tuple)) else None
        ordinary = ("shell", "preexec_fn", "pass_fds", "executable", "gid", "gids", "uid")
        entry = warm_entry(list(command)) if command is not None else None
        if (
            os.environ.get(SWITCH, "1") != "0"
            and not any(call[name] for name in ordinary)
            and entry is not None
            and call.get("process_group") in (None, -1)
        ):
            warm = warm_interpreter(env)
            if warm is not None:
                streams = [call["p2cread"], call["c2pwrite"], call["errwrite"]]
                self._start_warm(
                    warm,
                    entry,
                    call["cwd"],
                    env,
                    call["start_new_session"],
                    call["umask"],
                    *streams,
                )
                pipes = ("p2cread", "p2cwrite", "c2pread", "c2pwrite", "errread", "errwrite")
                self._close_pipe_fds(*(call[name] for name in pipes))  # type: ignore[attr-defined]
                return
        super()._execute_child(*popen_args)  # type: ignore[misc]

    def _start_warm(self, warm, entry, cwd, env, new_session, umask, stdin, stdout, stderr) -> None:
        streams = [stdin, stdout, stderr]
        opened = []
        for index, handle in enumerate(streams):
            if handle == -1:  # inherited: the worker's own stream (stdin: nothing to read)
                if index == 0:
                    handle = os.open(os.devnull, os.O_RDONLY)
                    opened.append(handle)
                else:
                    handle = index
            streams[index] = handle
        request = {
            "script": entry.script,
            "args": entry.args,
            "executable": entry.executable,
            "cwd": os.fspath(cwd) if cwd is not None else os.getcwd(),
            "env": env,
            "new_session": bool(new_session),
            "umask": umask,
        }
        try:
            self.pid = warm.start(request, streams)
        finally:
            for handle in opened:
                os.close(handle)
        self._warm_from = warm
        self._child_created = True

    def _try_wait(self, wait_flags):
        if self._warm_from is None:
            return super()._try_wait(wait_flags)  # type: ignore[misc]
        timeout = 0 if wait_flags & os.WNOHANG else None
        status = self._warm_from.status(self.pid, timeout)
        return (0, 0) if status is None else (self.pid, status)

    def _internal_poll(self, _deadstate=None, *args, **kwargs):
        if self._warm_from is None:
            return super()._internal_poll(_deadstate, *args, **kwargs)  # type: ignore[misc]
        if self.returncode is None and self._waitpid_lock.acquire(False):  # type: ignore[attr-defined]
            try:
                status = self._warm_from.status(self.pid, 0)
                if status is not None:
                    self._handle_exitstatus(status)  # type: ignore[attr-defined]
            finally:
                self._waitpid_lock.release()  # type: ignore[attr-defined]
        return self.returncode


def _warm_base_env() -> dict[str, str]:
    """The warm interpreter's environment: a command's, as the worker's environment is now (a
    command whose environment differs from it in what is read at import starts anew)."""
    env = cli_env()
    env.pop("PYTEST_CURRENT_TEST", None)
    return env


def run(args: list[str], *, timeout: float | None = None, **kwargs: Any):
    """``subprocess.run(args, capture_output=True, text=True, ...)`` with ``WarmPopen``."""
    with WarmPopen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kwargs) as p:
        try:
            stdout, stderr = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            raise
    return subprocess.CompletedProcess(p.args, p.returncode, stdout, stderr)
