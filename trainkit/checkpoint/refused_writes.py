"""A checkpoint its folder refused (a full disk or quota, a read-only or unwritable folder) said in
one line: what, where, the space, and what is kept there. The same line whether the save ran on
the training thread or in the background (``AsyncCheckpointIO``)."""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
from pathlib import Path

import torch

DISK_FULL = (errno.ENOSPC, errno.EDQUOT)
NOT_WRITABLE = (errno.EROFS, errno.EACCES, errno.EPERM)


def refused_write(path: str | os.PathLike, error: BaseException, needed: int | None) -> str | None:
    """One line for a checkpoint its folder refused (torch reports a full disk as 'unexpected
    pos'; the OSError is behind it): what happened, where, the space (``needed`` bytes, when
    known), and what is kept there, down to the newest complete checkpoint. None for any other
    failure."""
    code = _refused_errno(error)
    if code is None:
        return None
    path = Path(path)
    newest = newest_checkpoint(path.parent)
    kept = ["the previous file of that name is kept"] if path.exists() else []
    kept.append(
        f"the newest complete checkpoint there is {str(newest)!r}"
        if newest is not None
        else "no complete checkpoint is there yet"
    )
    reason = os.strerror(code)
    if code in DISK_FULL:
        need = f"it needs about {mib(needed)} MiB, " if needed is not None else ""
        return (
            f"disk full while writing checkpoint {str(path)!r}: {need}"
            f"{mib(_free_bytes(path.parent))} MiB are free there ({reason}); expected room for "
            f"it ({'; '.join(kept)}); free space there, or save to another disk "
            "(ModelCheckpoint dirpath)"
        )
    return (
        f"cannot write checkpoint {str(path)!r}: {reason} in {str(path.parent)!r}; expected a "
        f"folder this process can write to ({'; '.join(kept)}); make it writable, or save to "
        "another folder (ModelCheckpoint dirpath)"
    )


def _refused_errno(error: BaseException) -> int | None:
    """The errno of a full disk or an unwritable folder behind ``error``, if there is one."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno in (*DISK_FULL, *NOT_WRITABLE):
            return seen.errno
        seen = seen.__cause__ or seen.__context__
    return None


def _free_bytes(folder: Path) -> int:
    """Free bytes on the filesystem of ``folder`` (or of its nearest existing parent)."""
    for candidate in (folder, *folder.parents):
        try:
            return shutil.disk_usage(candidate).free
        except OSError:
            continue
    return 0


def newest_checkpoint(folder: Path) -> Path | None:
    """The most recently written ``*.ckpt`` in ``folder`` (a file or a sharded folder; temp
    files are hidden, so only complete checkpoints count), or None."""
    found: list[tuple[int, Path]] = []
    with contextlib.suppress(OSError):
        for entry in folder.iterdir():
            if entry.suffix == ".ckpt" and not entry.name.startswith("."):
                with contextlib.suppress(OSError):
                    found.append((entry.stat().st_mtime_ns, entry))
    return max(found)[1] if found else None


def tensor_bytes(tree: object) -> int:
    """Bytes of the tensors in a (nested) checkpoint."""
    if isinstance(tree, torch.Tensor):
        return tree.numel() * tree.element_size()
    if isinstance(tree, dict):
        return sum(tensor_bytes(value) for value in tree.values())
    if isinstance(tree, list | tuple):
        return sum(tensor_bytes(value) for value in tree)
    return 0


def mib(size: int) -> str:
    return f"{size / 2**20:.1f}"
