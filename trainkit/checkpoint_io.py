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
    if path.is_dir():
        return _load_sharded(path, map_location, weights_only)
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


SHARDED_META = "trainkit.pt"


def _load_sharded(path: Path, map_location: Any, weights_only: bool) -> dict[str, Any]:
    """A sharded checkpoint folder (torch.distributed.checkpoint) read back as one full dict."""
    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

    checkpoint = load_checkpoint(path / SHARDED_META, map_location, weights_only)
    with tempfile.TemporaryDirectory() as tmp:
        full = Path(tmp) / "full.pt"
        dcp_to_torch_save(path, full)
        checkpoint.update(torch.load(full, map_location=map_location, weights_only=weights_only))
    return checkpoint


def save_sharded_checkpoint(
    checkpoint: dict[str, Any], path: str | os.PathLike, is_writer: bool, barrier: Any
) -> Path:
    """Every rank writes its shards of ``state_dict``/``optimizer_states`` (a collective); the
    writer rank adds the rest as trainkit.pt; the folder replaces ``path`` once complete."""
    import shutil

    import torch.distributed.checkpoint as dcp

    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    if is_writer and tmp.exists():
        shutil.rmtree(tmp)
    barrier()
    shards = {key: checkpoint.pop(key) for key in ("state_dict", "optimizer_states")}
    dcp.save(shards, checkpoint_id=str(tmp))
    if is_writer:
        save_checkpoint(checkpoint, tmp / SHARDED_META)
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()
        os.replace(tmp, path)
    barrier()
    return path


def find_checkpoint(root: str | os.PathLike, name: str = "last.ckpt") -> Path | None:
    """The most recently written ``name`` under ``root`` (any version folder), or None."""
    candidates = [
        p for p in Path(root).glob(f"**/{name}") if p.is_file() or (p / SHARDED_META).is_file()
    ]
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
