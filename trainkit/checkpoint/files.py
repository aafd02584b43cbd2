"""Checkpoint files and folders: atomic writes, safe (weights_only) loads, sharded checkpoint
folders, and finding ``last``/``best``. (How the Trainer calls these: ``checkpoint_io.py``.)"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import socket
import tempfile
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from trainkit.checkpoint.refused_writes import refused_write, tensor_bytes

if TYPE_CHECKING:
    from torch.serialization import MAP_LOCATION

CHECKPOINT_FORMAT = 1


# a temp file's name: .<checkpoint name>.<host>-<pid>.<random>.tmp (the writer, to sweep it once
# that process is gone)
_TEMP = re.compile(r"^\..+\.(?P<host>[^.]+)-(?P<pid>\d+)\.[^.]+\.tmp$")


def writer_tag() -> str:
    """``<host>-<pid>`` of this process, as its temp files carry it."""
    return f"{socket.gethostname().split('.')[0]}-{os.getpid()}"


def sweep_dead_writers(folder: Path) -> None:
    """Remove the temp files of checkpoint writers on this host that are no longer running (a
    writer killed mid-save); a live writer's, or another host's, stay."""
    host = socket.gethostname().split(".")[0]
    for temp in folder.glob(".*.tmp"):
        owner = _TEMP.match(temp.name)
        if owner is None or owner["host"] != host or _alive(int(owner["pid"])):
            continue
        temp.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def save_checkpoint(checkpoint: dict[str, Any], path: str | os.PathLike) -> Path:
    """Write ``checkpoint`` to ``path`` atomically: temp file, fsync, rename, fsync the folder.
    A folder that refuses it (full disk or quota, read-only, not writable) raises a one-line
    CheckpointWriteError; the previous file of that name is kept and no temp file is left."""
    path = Path(path)
    try:
        _write_atomically(checkpoint, path)
    except Exception as err:
        line = refused_write(path, err, tensor_bytes(checkpoint))
        if line is None:
            raise
        raise CheckpointWriteError(line) from err
    return path


def _write_atomically(checkpoint: dict[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    sweep_dead_writers(path.parent)
    fd, tmp = tempfile.mkstemp(
        prefix=f".{path.name}.{writer_tag()}.", suffix=".tmp", dir=path.parent
    )
    try:
        os.fchmod(fd, 0o666 & ~current_umask())  # as open() would: teammates can read it
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


def current_umask() -> int:
    """This process's umask (reading it means setting it; it is put straight back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


class CheckpointError(ValueError):
    """A checkpoint that cannot be used: unreadable, not a trainkit checkpoint, or another model's."""


class CheckpointWriteError(CheckpointError, RuntimeError):
    """A checkpoint that could not be written, said in one line: its folder refused it (full
    disk, read-only, not writable), or a background write failed (raised on the training thread
    at the next save or the end of fit). The CLI prints the line and exits 1."""


def load_checkpoint(
    path: str | os.PathLike,
    map_location: MAP_LOCATION = "cpu",
    weights_only: bool = True,
    mmap: bool = False,
) -> dict[str, Any]:
    """Read a checkpoint, after checking every entry's CRC-32; ``weights_only=True`` refuses
    pickled code unless you opt out; ``mmap`` maps the tensors instead of reading them (the
    checksums are still read: the pre-flight check uses it)."""
    path = Path(path)
    if path.is_dir():
        if not (path / SHARDED_META).is_file():
            raise CheckpointError(
                f"checkpoint {str(path)!r} is a folder without {SHARDED_META}; expected a "
                "checkpoint file or a sharded checkpoint folder written by trainkit"
            )
        checkpoint = _load_sharded(path, map_location, weights_only)
    elif not path.is_file():
        raise FileNotFoundError(f"checkpoint {str(path)!r} does not exist")
    else:
        checkpoint = _read(path, map_location, weights_only, mmap)
    return checkpoint


def require_state_dict(checkpoint: object, path: str | os.PathLike) -> None:
    """A model checkpoint is a dict with a ``state_dict``."""
    if not isinstance(checkpoint, dict) or "state_dict" not in checkpoint:
        raise CheckpointError(
            f"checkpoint {str(path)!r} holds no state_dict; expected a checkpoint written by "
            "trainkit's Trainer.save_checkpoint (or Lightning's)"
        )


# torch names the refused global differently across versions: "Unsupported global: GLOBAL x.y",
# "unsupported GLOBAL x.y whose module x is blocked"
_REFUSED_GLOBAL = re.compile(r"(?:[Uu]nsupported global: GLOBAL|unsupported GLOBAL) ([\w.]+)")


def check_integrity(path: Path) -> None:
    """A torch zip checkpoint's entries must match their CRC-32 (torch itself does not check:
    a flipped byte in a tensor loads silently); a damaged file is a one-line CheckpointError."""
    import zipfile

    if not zipfile.is_zipfile(path):
        return  # an old non-zip format, or not a checkpoint at all: torch.load says which
    try:
        with zipfile.ZipFile(path) as archive:
            damaged = archive.testzip()
    except Exception as err:  # any way the archive fails to read back is damage too
        damaged = f"({type(err).__name__}: {str(err)[:80]})"
    if damaged is not None:
        raise CheckpointError(
            f"checkpoint {str(path)!r} is damaged: its entry {damaged!r} does not match the "
            "checksum written with it; expected the bytes trainkit wrote; the file changed on "
            "disk or in a copy: use an earlier checkpoint (or copy it again)"
        )


def _read(path: Path, map_location: MAP_LOCATION, weights_only: bool, mmap: bool = False) -> Any:
    check_integrity(path)  # also for mmap (the pre-flight check): a damaged file fails first
    try:
        return torch.load(path, map_location=map_location, weights_only=weights_only, mmap=mmap)
    except Exception as err:
        found = _REFUSED_GLOBAL.search(str(err)) if weights_only else None
        if found is not None or (weights_only and "allowed global" in str(err)):
            what = f" (the global {found.group(1)}, which loading would run)" if found else ""
            raise CheckpointError(
                f"checkpoint {str(path)!r} holds pickled objects a weights-only load refuses"
                f"{what}; expected tensors and plain values; only if you trust the file, set "
                "trainer.checkpoint_weights_only: false (docs/reliability.md)"
            ) from err
        if mmap and "mmap" in str(err):  # an old (non-zip) format: read it whole instead
            return _read(path, map_location, weights_only)
        import zipfile

        reason = (
            f"{type(err).__name__}: {(str(err).strip().splitlines() or [''])[0][:120]}"
            if zipfile.is_zipfile(path)
            else "not a complete torch zip archive"
        )
        raise CheckpointError(
            f"checkpoint {str(path)!r} cannot be read ({reason}); expected a complete file "
            "written by trainkit; it is truncated or corrupted: use an earlier one"
        ) from err


def check_fits(module: torch.nn.Module, state_dict: dict[str, Any], path: str) -> None:
    """Raise CheckpointError naming the missing, unexpected and mis-shaped keys, if any."""
    expected = module.state_dict()
    missing = [key for key in expected if key not in state_dict]
    unexpected = [key for key in state_dict if key not in expected]
    shapes = [
        f"{key} {list(state_dict[key].shape)} vs {list(value.shape)}"
        for key, value in expected.items()
        if key in state_dict
        and hasattr(state_dict[key], "shape")
        and hasattr(value, "shape")
        and state_dict[key].shape != value.shape
    ]
    problems = [
        f"{label} {_few(items)}"
        for label, items in (
            ("missing keys", missing),
            ("unexpected keys", unexpected),
            ("shape mismatches (checkpoint vs model)", shapes),
        )
        if items
    ]
    if problems:
        raise CheckpointError(
            f"checkpoint {path!r} does not fit {type(module).__name__}: {'; '.join(problems)}; "
            "expected a checkpoint of this model with these hyperparameters"
        )


def _few(items: list[str], shown: int = 4) -> str:
    more = f" and {len(items) - shown} more" if len(items) > shown else ""
    return f"[{', '.join(items[:shown])}]{more}"


SHARDED_META = "trainkit.pt"


def _load_sharded(path: Path, map_location: MAP_LOCATION, weights_only: bool) -> dict[str, Any]:
    """A sharded checkpoint folder (torch.distributed.checkpoint) read back as one full dict."""
    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

    checkpoint = _read(path / SHARDED_META, map_location, weights_only)
    with tempfile.TemporaryDirectory() as tmp:
        full = Path(tmp) / "full.pt"
        dcp_to_torch_save(path, full)
        checkpoint.update(_read(full, map_location, weights_only))
    return checkpoint


def load_sharded_checkpoint_into(
    shards: dict[str, Any], path: str | os.PathLike, weights_only: bool = True
) -> dict[str, Any]:
    """A sharded checkpoint folder read into ``shards`` (this rank's parts of ``state_dict`` /
    ``optimizer_states``, filled in place by torch.distributed.checkpoint, a collective) plus
    the rest (trainkit.pt): every rank reads only what it holds."""
    import torch.distributed.checkpoint as dcp

    dcp.load(shards, checkpoint_id=str(path))
    checkpoint = _read(Path(path) / SHARDED_META, "cpu", weights_only)
    checkpoint.update(shards)
    return checkpoint


def save_sharded_checkpoint(
    checkpoint: dict[str, Any],
    path: str | os.PathLike,
    is_writer: bool,
    barrier: Callable[[], None],
) -> Path:
    """Every rank writes its shards of ``state_dict``/``optimizer_states`` (a collective); the
    writer rank adds the rest as trainkit.pt; the folder replaces ``path`` once complete."""
    import torch.distributed.checkpoint as dcp

    tmp = sharded_temp_folder(path, is_writer, barrier)
    dcp.save(split_shards(checkpoint), checkpoint_id=str(tmp))
    if is_writer:
        commit_sharded(checkpoint, tmp, path)
    barrier()
    return Path(path)


def sharded_temp_folder(
    path: str | os.PathLike, is_writer: bool, barrier: Callable[[], None]
) -> Path:
    """The folder a sharded checkpoint of ``path`` is written into, emptied (a collective)."""

    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    if is_writer and tmp.exists():
        shutil.rmtree(tmp)
    barrier()
    return tmp


def split_shards(checkpoint: dict[str, Any]) -> dict[str, Any]:
    """Take the sharded parts (weights, optimizer states) out of ``checkpoint``."""
    return {key: checkpoint.pop(key) for key in ("state_dict", "optimizer_states")}


def commit_sharded(rest: dict[str, Any], tmp: Path, path: str | os.PathLike) -> None:
    """Once every rank's shards are in ``tmp``: add trainkit.pt and move the folder to ``path``."""

    path = Path(path)
    save_checkpoint(rest, tmp / SHARDED_META)
    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()
    os.replace(tmp, path)


def find_checkpoint(root: str | os.PathLike, name: str = "last.ckpt") -> Path | None:
    """The ``name`` under ``root`` (any version folder) that trained the furthest, or None
    (``checkpoint_candidates``)."""
    candidates = checkpoint_candidates(root, name)
    return candidates[0][1] if candidates else None


def checkpoint_candidates(
    root: str | os.PathLike, name: str = "last.ckpt"
) -> list[tuple[Progress, Path]]:
    """Every ``name`` under ``root`` with how far it trained, the furthest first (the newest
    file first among equals; an unreadable one last). Modification times alone mislead: ``cp
    -r`` of a run folder makes its older checkpoint the newest file."""
    found = [
        p for p in Path(root).glob(f"**/{name}") if p.is_file() or (p / SHARDED_META).is_file()
    ]
    ranked = [(recorded_progress(p), p) for p in found]
    ranked.sort(key=lambda item: (item[0].order, item[1].stat().st_mtime_ns), reverse=True)
    return ranked


@dataclasses.dataclass(frozen=True)
class Progress:
    """How far a checkpoint trained: its epoch, optimizer steps and world size (-1: unknown)."""

    epoch: int = -1
    global_step: int = -1
    world_size: int = 1

    @property
    def order(self) -> tuple[int, int]:
        """Epochs, then steps x ranks (the samples trained, at the same batch per device: one
        process's 156 steps and two ranks' 78 have trained as far)."""
        return self.epoch, self.global_step * self.world_size

    def __str__(self) -> str:
        ranks = f" on {self.world_size} ranks" if self.world_size > 1 else ""
        return f"epoch {self.epoch}, step {self.global_step}{ranks}"


def recorded_progress(path: Path) -> Progress:
    """How far a checkpoint trained, read without loading its tensors."""
    meta = path / SHARDED_META if path.is_dir() else path
    try:
        saved = torch.load(meta, map_location="cpu", weights_only=True, mmap=True)
    except Exception:  # torn, foreign or not a checkpoint: never preferred
        return Progress()
    if not isinstance(saved, dict):
        return Progress()
    epoch, step, world = (saved.get(key) for key in ("epoch", "global_step", "world_size"))
    if not isinstance(epoch, int) or not isinstance(step, int):
        return Progress()
    return Progress(epoch, step, world if isinstance(world, int) and world > 0 else 1)


def plain_hparams(hparams: Mapping[str, Any]) -> dict[str, Any]:
    """Hyperparameters reduced to what a weights-only load accepts (others become strings)."""
    return {key: _plain(value) for key, value in hparams.items()}


def _plain(value: object) -> Any:
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, list | tuple):
        return type(value)(_plain(v) for v in value)
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    return repr(value)
