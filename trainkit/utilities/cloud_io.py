"""Paths that may be remote (``s3://``, ``gs://``, ``memory://``...): the fsspec filesystem of a
path, whether a folder is one filesystem shared by every rank, and Lightning's ``_load`` and
``_atomic_save`` of a checkpoint at such a path (``lightning.fabric.utilities.cloud_io``)."""

from __future__ import annotations

import io
import time
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trainkit.strategies.base import Strategy
    from trainkit.utilities.types import _MAP_LOCATION_TYPE

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


def _load(
    path_or_url: IO[bytes] | str | Path,
    map_location: _MAP_LOCATION_TYPE = None,
    weights_only: bool | None = None,
) -> Any:
    """``torch.load`` of a file object, an ``http(s)://`` URL (``torch.hub``; not weights-only
    unless asked) or a path any fsspec filesystem holds."""
    import torch

    location: Any = map_location  # Lightning's type: a device index too, which torch takes
    if not isinstance(path_or_url, str | Path):
        return torch.load(path_or_url, map_location=location, weights_only=weights_only)
    if str(path_or_url).startswith("http"):
        return torch.hub.load_state_dict_from_url(
            str(path_or_url), map_location=location, weights_only=bool(weights_only)
        )
    with get_filesystem(path_or_url).open(str(path_or_url), "rb") as file:
        return torch.load(file, map_location=location, weights_only=weights_only)


def _atomic_save(checkpoint: dict[str, Any], filepath: str | Path) -> None:
    """``torch.save`` of ``checkpoint`` to ``filepath`` (any fsspec path) as one write inside a
    filesystem transaction, so a reader never finds half a file."""
    import fsspec
    import torch

    buffer = io.BytesIO()
    torch.save(checkpoint, buffer)
    filesystem, path = fsspec.core.url_to_fs(str(filepath))
    with filesystem.transaction, filesystem.open(path, "wb") as file:
        file.write(buffer.getvalue())


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
