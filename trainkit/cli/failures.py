"""Bad input to a CLI ends as one line on stderr and exit code 2, never a traceback: what was
wrong, the accepted forms, and the fix."""

from __future__ import annotations

import contextlib
import itertools
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from jsonargparse import ArgumentParser


def fail(message: str, prog: str = "trainkit") -> None:
    """Bad input: one line on stderr, exit code 2, no traceback. Under an external launcher
    (torchrun, srun, mpirun), where every rank reads the same input, global rank 0 says it."""
    if says_it():
        print(f"{prog}: error: {message}", file=sys.stderr, flush=True)
    raise SystemExit(2)


def says_it() -> bool:
    """Whether this process prints a bad-input line: not a rank other than 0 of an external
    launcher, whose ranks all read the same input (trainkit's own launcher shows each rank's
    failure itself); a rank whose own launch variables are wrong says so itself."""
    import os

    from trainkit.distributed.environments import detect_environment
    from trainkit.distributed.signals import LAUNCHED_ENV
    from trainkit.errors import ConfigError

    if LAUNCHED_ENV in os.environ:
        return True
    try:
        cluster = detect_environment()
    except ConfigError:
        return True
    return not cluster.creates_processes_externally or cluster.global_rank == 0


def config_error_inside(error: BaseException) -> BaseException | None:
    """The ConfigError a model or data __init__ raised, from the errors wrapped around it."""
    from trainkit.cli.errors import exception_chain
    from trainkit.errors import ConfigError

    return next((e for e in exception_chain(error) if isinstance(e, ConfigError)), None)


def invalid_yaml_file(argv: list[str]) -> str | None:
    """For a config that does not parse: the first ``-c`` file that is not valid YAML, with the
    line and column of the problem (the parser names no file), or None."""
    import yaml

    for flag, value in itertools.pairwise(argv):
        if flag not in ("-c", "--config"):
            continue
        try:
            yaml.safe_load(Path(value).read_text(encoding="utf-8"))
        except yaml.YAMLError as err:
            mark = getattr(err, "problem_mark", None)
            where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
            problem = getattr(err, "problem", None) or str(err).splitlines()[0]
            return (
                f"config file {value!r} is not valid YAML: {problem}{where}; expected YAML "
                "sections like model:, data:, trainer:; fix the syntax there"
            )
        except (OSError, UnicodeDecodeError):
            continue
    return None


def undecodable_file(argv: list[str]) -> str:
    """The first ``-c``/``--config`` file that is not UTF-8 (the decoder names no file)."""
    for flag, value in itertools.pairwise(argv):
        if flag in ("-c", "--config"):
            try:
                Path(value).read_text(encoding="utf-8")
            except UnicodeDecodeError:
                return value
            except OSError:
                continue
    return "?"


@contextlib.contextmanager
def one_line_parse_errors(
    prog: str, argv: list[str], hint: str, parser: Callable[[], ArgumentParser | None]
) -> Iterator[None]:
    """Around parsing and building the classes: each kind of bad input as one line.
    ``parser``: a callable returning the parser that knows the options (for suggestions)."""
    from jsonargparse import ArgumentError
    from omegaconf.errors import OmegaConfBaseException

    from trainkit.errors import ConfigError

    try:
        yield
    except ArgumentError as err:
        from trainkit.cli.errors import also_unknown, summarize, unknown_options
        from trainkit.cli.user_code import import_failure, missing_dependency, report_user_error

        failure = import_failure(str(err))  # the user's module raised while it was imported
        if failure is not None:
            one_line = missing_dependency(failure)
            if one_line is None:
                report_user_error(failure, prog)
            fail(one_line, prog)
        known = parser()
        defaults = known.get_defaults() if known else None
        unknown = unknown_options(str(err), defaults, hint, argv) if defaults else None
        broken = invalid_yaml_file(argv) if "Problems parsing config" in str(err) else None
        others = also_unknown(argv, defaults) if defaults and not (unknown or broken) else ""
        fail(unknown or broken or summarize(str(err), hint) + others, prog)
    except ConfigError as err:
        fail(str(err), prog)
    except SystemExit as stop:  # an argparse of the user's module, run as trainkit imported it
        from trainkit.cli.user_code import users_argparse

        where = users_argparse(stop)
        if where is None or stop.code in (0, None):
            raise
        fail(
            f"the usage and error lines above come from your file's argparse, not trainkit: "
            f"{where} calls parse_args() when trainkit imports it; expected no argument "
            'parsing at import; move parse_args() under if __name__ == "__main__":',
            prog,
        )
    except UnicodeDecodeError as err:
        fail(
            f"config file {undecodable_file(argv)!r} is not UTF-8 text (byte "
            f"{err.object[err.start : err.start + 1]!r} at offset {err.start}); expected a "
            "UTF-8 YAML file; save it as UTF-8",
            prog,
        )
    except OmegaConfBaseException as err:
        reason = str(err).splitlines()[0]
        fail(
            f"config interpolation failed: {reason}; expected ${{section.key}} or "
            f"${{oc.env:VAR,default}}; {hint}",
            prog,
        )
    except ValueError as err:  # jsonargparse wraps what a class's __init__ rejected
        from trainkit.cli.errors import raised_in_init, rejected_value
        from trainkit.cli.user_code import raised_by_its_code, report_init_error, where_it_failed

        inner = config_error_inside(err)
        if inner is not None:
            fail(str(inner), prog)
        failure = raised_in_init(err, str(err))
        if failure is None:
            raise
        if raised_by_its_code(failure):  # a KeyError, a missing super().__init__(), a .cuda()
            report_init_error(failure, prog)
        fail(rejected_value(failure, where_it_failed(failure.error)), prog)


@contextlib.contextmanager
def one_line_run_errors(prog: str, also: tuple[type[BaseException], ...] = ()) -> Iterator[None]:
    """Around a Trainer stage: what the Trainer found wrong with the input (and the ``also``
    kinds, for a pre-flight check), as one line."""
    from trainkit.checkpoint.files import CheckpointError, CheckpointWriteError
    from trainkit.errors import ConfigError, MisconfigurationError, NonFiniteLossError

    try:
        yield
    except (NonFiniteLossError, CheckpointWriteError) as err:  # the run failed (exit 1), and
        print(f"{prog}: error: {err}", file=sys.stderr, flush=True)  # the line says all
        raise SystemExit(1) from None
    except (ConfigError, CheckpointError, MisconfigurationError, *also) as err:
        fail(str(err), prog)


@contextlib.contextmanager
def dry_run_errors(prog: str, dry_run: bool) -> Iterator[None]:
    """In a dry run, what the user's code raised is the answer: one line, exit 2."""
    from trainkit.checkpoint.files import CheckpointError
    from trainkit.cli.user_code import where_it_failed
    from trainkit.errors import ConfigError, MisconfigurationError

    try:
        yield
    except (ConfigError, CheckpointError, MisconfigurationError):
        raise  # already one line
    except Exception as err:
        if not dry_run:
            raise
        where = where_it_failed(err)
        reason = (str(err).strip().splitlines() or [""])[0]
        fail(
            f"dry run: the real run would fail: {type(err).__name__}: {reason}"
            f"{f' ({where})' if where else ''}; fix it and run with --dry_run again",
            prog,
        )
