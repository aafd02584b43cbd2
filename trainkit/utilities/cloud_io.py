"""Paths that may be remote (``s3://``, ``gs://``, ``memory://``...): the fsspec filesystem of a
path, and whether a folder is one filesystem shared by every rank."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trainkit.strategies.base import Strategy

SHARED_CHECK_FILE = ".trainkit_shared_fs_check"


def is_local_path(path: str | Path) -> bool:
    """Whether ``path`` is on this machine's filesystem (no protocol, or ``file://``)."""
    text = str(path)
    return "://" not in text or text.startswith("file://")


def get_filesystem(path: str | Path, **kwargs: Any) -> Any:
    """The fsspec filesystem that holds ``path``; ``kwargs`` go to it (credentials...)."""
    try:
        import fsspec
    except ImportError:
        raise ModuleNotFoundError(
            f"get_filesystem({str(path)!r}) needs fsspec: pip install fsspec "
            "(plus s3fs, gcsfs... for remote paths)"
        ) from None
    filesystem, _ = fsspec.core.url_to_fs(str(path), **kwargs)
    return filesystem


def is_shared_filesystem(
    strategy: Strategy, path: str | Path | None = None, timeout: int = 3
) -> bool:
    """Whether every rank sees the same folder at ``path`` (default: the working directory):
    rank 0 writes a file there and the others look for it for up to ``timeout`` seconds. A
    remote path is shared; call it on every rank at once."""
    if path is not None and not is_local_path(path):
        return True
    folder = Path(Path.cwd() if path is None else path).resolve()
    if strategy.world_size == 1:
        return True
    if not all(other == folder for other in strategy.all_gather_object(folder)):
        return False
    if not all(strategy.all_gather_object(folder.exists())):
        raise FileNotFoundError(f"is_shared_filesystem: {folder} does not exist on every rank")
    folder = folder.parent if folder.is_file() else folder
    check = folder / SHARED_CHECK_FILE
    check.unlink(missing_ok=True)
    strategy.barrier()
    found = True
    if strategy.is_global_zero:
        check.touch()
    else:
        deadline = time.monotonic() + timeout
        while not (found := check.exists()) and time.monotonic() < deadline:
            time.sleep(0.05)  # polling a file another machine writes: no signal to wait on
    strategy.barrier()
    if strategy.is_global_zero:
        check.unlink(missing_ok=True)
    return all(strategy.all_gather_object(found))
