"""The launchers' scratch folders in the temp dir (error files, the rank board, a spawned rank's
result), named after the process that owns them, so a folder a SIGKILLed launcher could not
remove is swept by the next one."""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path


def scratch_folder(kind: str) -> str:
    """A new folder ``trainkit-<kind>-<pid>-XXXX`` in the temp dir, after removing this user's
    folders of that kind whose owner process is gone."""
    sweep_orphans(kind)
    return tempfile.mkdtemp(prefix=f"trainkit-{kind}-{os.getpid()}-")


def sweep_orphans(kind: str, root: str | None = None) -> list[Path]:
    """Remove this user's ``trainkit-<kind>-<pid>-*`` folders whose process no longer runs;
    returns what was removed."""
    removed = []
    for folder in Path(root or tempfile.gettempdir()).glob(f"trainkit-{kind}-*-*"):
        owner = folder.name.removeprefix(f"trainkit-{kind}-").partition("-")[0]
        try:
            mine = folder.is_dir() and folder.stat().st_uid == os.getuid()
        except OSError:
            continue
        if mine and owner.isdigit() and not process_runs(int(owner)):
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed


def process_runs(pid: int) -> bool:
    """Whether a process with this id exists (one we may not signal exists too)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
