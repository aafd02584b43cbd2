"""Which modules a config's ``class_path`` may import: jsonargparse's denylist of what executes
code by name (os, subprocess, pickle, importlib, ...) enforced, and an opt-in allowlist.

A config is trusted like code: naming a class imports its module, and importing runs the module.
By default everything but the denylist is importable; ``TRAINKIT_IMPORT_ALLOWLIST=pkg1,pkg2.mod``
restricts class paths to those packages (plus trainkit, torch and torchmetrics, whose classes a
config names for optimizers, schedulers and metrics). Code of trainkit's that imports a module a
config named (to explain why it failed) asks ``refuses`` first: a refused module is never run."""

from __future__ import annotations

import os
from collections.abc import Mapping

from trainkit.errors import ConfigError

ALLOWLIST_ENV = "TRAINKIT_IMPORT_ALLOWLIST"
ALWAYS_ALLOWED = ("trainkit", "torch", "torchmetrics")


def allowlist(environ: Mapping[str, str] = os.environ) -> list[str]:
    """The packages the user allowed (empty: no allowlist), checked to be dotted names."""
    entries = [
        entry.strip() for entry in environ.get(ALLOWLIST_ENV, "").split(",") if entry.strip()
    ]
    for entry in entries:
        if not all(part.isidentifier() for part in entry.split(".")) or entry.startswith(
            "jsonargparse"
        ):
            raise ConfigError(
                ALLOWLIST_ENV,
                entry,
                "comma-separated dotted package or module names (myproj, myproj.models)",
                "jsonargparse itself cannot be allowed",
            )
    return entries


def apply_import_policy(environ: Mapping[str, str] = os.environ) -> None:
    """Set the policy for this process's parsing, before any config is read."""
    from jsonargparse import set_parsing_settings

    allowed = allowlist(environ)
    if allowed:
        set_parsing_settings(
            import_path_denylist=["*"], import_path_allowlist=[*ALWAYS_ALLOWED, *allowed]
        )
    else:  # enforce the default denylist (jsonargparse only warns about it before 5.0)
        set_parsing_settings(import_path_denylist=[])


def refuses(path: str) -> bool:
    """Whether the policy refuses the dotted ``path`` by its name alone: the same lookup the
    parser makes before it imports a class path (the denylist; with an allowlist, whatever is
    outside it). A jsonargparse without that lookup (it is not public) refuses nothing here;
    its parser still refuses such a class path when it reads it."""
    try:
        from jsonargparse._common import denying_import_path_entry  # the parser's own verdict
    except ImportError:
        return False
    return denying_import_path_entry(path) is not None
