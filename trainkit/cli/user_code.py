"""Errors inside the user's own package, which the parser only sees as "cannot use this class".

jsonargparse reports a class whose module raised on import (a NameError, a SyntaxError, an
import of a missing package) as a class path it cannot resolve, with no file or line. Importing
the module again here recovers the exception itself: a missing package is named with the file and
line that imported it (one line), anything else keeps the traceback of the user's code."""

from __future__ import annotations

import importlib
import importlib.util
import itertools
import re
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

if TYPE_CHECKING:
    from trainkit.cli.errors import InitFailure

# the class paths jsonargparse tried to import, as its messages quote them
_TRIED = (
    re.compile(r"^\s*Given value: ([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)\s*$", re.MULTILINE),
    re.compile(r"class_path '([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)'"),
    re.compile(r"'class_path': '([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)'"),
)
_KEY = re.compile(r'Parser key "([^"]+)"')
# frames that are not the user's: trainkit's own files and the import machinery
_NOT_USERS = (
    "<frozen",
    str(Path(__file__).resolve().parents[1]),
    str(Path(importlib.__file__).parent),
)


@dataclass(frozen=True)
class UserImportFailure:
    """The class path whose module raised while importing, what it raised, and the config
    section it was given for."""

    path: str
    module: str
    error: BaseException
    key: str = "class"


def import_failure(message: str) -> UserImportFailure | None:
    """The first class path a parse error says was tried whose module exists but raises when
    imported; None when each imports, or names no module at all."""
    tried = [path for pattern in _TRIED for path in pattern.findall(message)]
    for path in dict.fromkeys(tried):
        module = path.rpartition(".")[0]
        error = _import_error(module)
        if error is not None:
            key = _KEY.search(message)
            return UserImportFailure(path, module, error, key.group(1) if key else "class")
    return None


def _import_error(module: str) -> BaseException | None:
    from trainkit.cli.import_policy import refuses

    if refuses(module):  # the parser refused it by name and never ran it: neither does this
        return None
    try:
        if importlib.util.find_spec(module) is None:  # imports the parent packages
            return None
        importlib.import_module(module)
    except ModuleNotFoundError as err:
        if err.name is not None and (module == err.name or module.startswith(err.name + ".")):
            return None  # the module itself is missing: the parser's message says so
        return err
    except Exception as err:  # whatever the user's module raised while it ran
        return err
    return None


def _user_frames(error: BaseException) -> list[traceback.FrameSummary]:
    """The traceback's frames in the user's files (not importlib's, not trainkit's)."""
    return [
        frame
        for frame in traceback.extract_tb(error.__traceback__)
        if not frame.filename.startswith(_NOT_USERS)
    ]


def missing_dependency(failure: UserImportFailure) -> str | None:
    """One line for a package the user's module imports but this Python lacks, naming the
    file and line of the import (no install advice: the name may be misspelled)."""
    error = failure.error
    if not isinstance(error, ModuleNotFoundError):
        return None
    frames = _user_frames(error)
    where = f"{frames[-1].filename} line {frames[-1].lineno}" if frames else repr(failure.module)
    return (
        f"{failure.key} class_path {failure.path!r}: {where} imports {error.name!r}, which is not "
        "installed in this Python; expected an importable module; check the spelling there, or "
        "install the package that provides it"
    )


def report_user_error(failure: UserImportFailure, prog: str) -> NoReturn:
    """The user's own traceback (their frames only), one line saying where it came from, and
    exit code 1, as for any error in their code."""
    error = failure.error
    frames = _user_frames(error)
    print("Traceback (most recent call last):", file=sys.stderr)
    print("".join(traceback.format_list(frames)), end="", file=sys.stderr)
    print("".join(traceback.format_exception_only(error)), end="", file=sys.stderr)
    print(
        f"{prog}: error: {failure.key} class_path {failure.path!r}: importing {failure.module!r} raised "
        f"{type(error).__name__} in your code (traceback above); fix it there",
        file=sys.stderr,
        flush=True,
    )
    raise SystemExit(1)


def own_frames(error: BaseException) -> list[traceback.FrameSummary]:
    """The traceback's frames in the user's own files: not trainkit's, not the import
    machinery's, not an installed package's (torch, jsonargparse)."""
    import sysconfig

    paths = sysconfig.get_paths()
    installed = tuple({paths["purelib"], paths["platlib"], paths["stdlib"]})
    return [f for f in _user_frames(error) if not f.filename.startswith(installed)]


def where_it_failed(error: BaseException) -> str:
    """``file:line in function`` of the innermost frame of the user's own code (not trainkit's,
    not an installed package's), or "" when the traceback has none."""
    frames = own_frames(error)
    if not frames:
        return ""
    frame = frames[-1]
    return f"{Path(frame.filename).name}:{frame.lineno} in {frame.name}"


def raised_by_its_code(failure: InitFailure) -> bool:
    """Whether a class that raised while being built failed in its own code rather than
    refusing a value: True unless the exception is a ValueError its own file raised (a check
    like ``raise ValueError("width must be <= 100")``) or no frame of the user's files ran (a
    library class refusing a value)."""
    error = failure.error
    frames = own_frames(error)
    if not frames:
        return False
    every = traceback.extract_tb(error.__traceback__)
    raised_there = bool(every) and every[-1] == frames[-1]  # the last frame is the user's
    return not (isinstance(error, ValueError) and raised_there)


# what a few common mistakes in ``__init__`` raise, and the fix
_INIT_FIXES = (
    (
        "before Module.__init__() call",
        "call super().__init__() first in {name}.__init__",
    ),
    (
        "not compiled with CUDA",
        "remove .cuda()/.to(device) from {name}.__init__: trainkit moves the model to its devices",
    ),
    (
        "no NVIDIA driver",
        "remove .cuda()/.to(device) from {name}.__init__: trainkit moves the model to its devices",
    ),
)


def report_init_error(failure: InitFailure, prog: str) -> NoReturn:
    """A model/data class whose ``__init__`` raised in its own code: the traceback of the
    user's frames, one line saying it is their code (not the config), and exit code 1."""
    error = failure.error
    frames = own_frames(error)
    print("Traceback (most recent call last):", file=sys.stderr)
    print("".join(traceback.format_list(frames)), end="", file=sys.stderr)
    print("".join(traceback.format_exception_only(error)), end="", file=sys.stderr)
    name = failure.path.rpartition(".")[2]
    fix = next(
        (fix.format(name=name) for text, fix in _INIT_FIXES if text in str(error)),
        "fix it there",
    )
    print(
        f"{prog}: error: {failure.call} raised {type(error).__name__} while it was built, in "
        f"your code (traceback above), not in the config; {fix}",
        file=sys.stderr,
        flush=True,
    )
    raise SystemExit(1)


def users_argparse(stop: SystemExit) -> str | None:
    """``file:line`` of the user's code whose ``argparse`` parse raised ``stop`` (argparse
    reads trainkit's own argv then, and prints a usage line that looks like trainkit's), or
    None when argparse was not called from the user's code."""
    import argparse

    frames = traceback.extract_tb(stop.__traceback__)
    mine = own_frames(stop)
    for caller, callee in itertools.pairwise(frames):
        if callee.filename == argparse.__file__ and caller in mine:
            return f"{caller.filename}:{caller.lineno}"
    return None
