"""Checkpoint files: atomic writes, safe (weights_only) loads, and finding ``last``/``best``."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import torch

CHECKPOINT_FORMAT = 1


def save_checkpoint(checkpoint: dict[str, Any], path: str | os.PathLike) -> Path:
    """Write ``checkpoint`` to ``path`` atomically: temp file, fsync, rename, fsync the folder."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            torch.save(checkpoint, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dir_fd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return path


def load_checkpoint(
    path: str | os.PathLike, map_location: Any = "cpu", weights_only: bool = True
) -> dict[str, Any]:
    """Read a checkpoint; ``weights_only=True`` refuses pickled code unless you opt out."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint {str(path)!r} does not exist")
    try:
        return torch.load(path, map_location=map_location, weights_only=weights_only)
    except Exception as err:
        if weights_only and "weights_only" in str(err):
            raise RuntimeError(
                f"checkpoint {str(path)!r} holds objects a weights-only load refuses; if you trust "
                "the file, load it with weights_only=False (Trainer(checkpoint_weights_only=False))"
            ) from err
        raise


def find_checkpoint(root: str | os.PathLike, name: str = "last.ckpt") -> Path | None:
    """The most recently written ``name`` under ``root`` (any version folder), or None."""
    candidates = [p for p in Path(root).glob(f"**/{name}") if p.is_file()]
    if not candidates:
        return None
    return max(candidates, key=lambda p: p.stat().st_mtime_ns)


def plain_hparams(hparams: dict[str, Any]) -> dict[str, Any]:
    """Hyperparameters reduced to what a weights-only load accepts (others become strings)."""
    return {key: _plain(value) for key, value in hparams.items()}


def _plain(value: Any) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list | tuple):
        return type(value)(_plain(v) for v in value)
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    return repr(value)
