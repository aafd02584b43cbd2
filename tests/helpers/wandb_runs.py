"""Read an offline W&B run back from disk: the records of its ``run-<id>.wandb`` file.

The file is a 7-byte header (``:W&B``, magic, version) followed by a LevelDB-style log: 32 KiB
blocks of chunks, each ``crc32 (4) | length (2, LE) | type (1)`` then the data; a record is one
FULL chunk or FIRST, MIDDLE..., LAST; a block's tail shorter than a chunk header is padding.
Each record is a ``wandb_internal_pb2.Record`` protobuf.
"""

from __future__ import annotations

import json
import struct
import time
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

BLOCK = 32 * 1024
CHUNK_HEADER = 7
FULL, FIRST, MIDDLE, LAST = 1, 2, 3, 4


def _chunk_is_whole(kind: int, payload: bytes, length: int, crc: int) -> bool:
    """A chunk wandb has finished writing: all its bytes are there and its checksum matches
    (wandb's checksum is crc32 over the type byte, then the data)."""
    return len(payload) == length and zlib.crc32(payload, zlib.crc32(bytes([kind]))) == crc


def records(path: Path) -> Iterator[Any]:
    """Every record of the run file, in order, up to the first chunk still being written."""
    from wandb.proto import wandb_internal_pb2

    data = path.read_bytes()
    assert data[:4] == b":W&B", f"{path} is not a W&B run file"
    position, pending = 7, b""
    while position + CHUNK_HEADER <= len(data):
        if BLOCK - position % BLOCK < CHUNK_HEADER:  # padding at a block's end
            position += BLOCK - position % BLOCK
            continue
        crc, length, kind = struct.unpack_from("<IHB", data, position)
        start = position + CHUNK_HEADER
        payload = data[start : start + length]
        if kind == 0 or not _chunk_is_whole(kind, payload, length, crc):
            break  # the end of what is on disk so far
        pending += payload
        position = start + length
        if kind in (FULL, LAST):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            yield record
            pending = b""


class OfflineRun:
    """What an offline run recorded: run info, config, history rows, artifacts, exit code."""

    def __init__(self, run_dir: Path) -> None:
        (self.file,) = run_dir.glob("run-*.wandb")
        self.info: Any = None
        self.config: dict[str, Any] = {}
        self.history: list[dict[str, Any]] = []
        self.artifacts: list[Any] = []
        self.exit_code: int | None = None
        for record in records(self.file):
            kind = record.WhichOneof("record_type")
            if kind == "run":
                self.info = record.run
                self.config.update(_items(record.run.config.update))
            elif kind == "config":
                self.config.update(_items(record.config.update))
            elif kind == "history":
                self.history.append(_items(record.history.item))
            elif kind == "artifact":
                self.artifacts.append(record.artifact)
            elif kind == "exit":
                self.exit_code = record.exit.exit_code

    def metric(self, name: str, step: str = "trainer/global_step") -> list[tuple[int, float]]:
        """``(step, value)`` of every history row that has ``name``."""
        return [(row[step], row[name]) for row in self.history if name in row]


def _items(items: Any) -> dict[str, Any]:
    return {item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in items}


def offline_runs(save_dir: Path, within_s: float = 120) -> list[OfflineRun]:
    """The offline runs wandb wrote under ``save_dir``, oldest first, once each has its exit
    record on disk (wandb's service may still be writing when ``finish()`` returns)."""
    deadline = time.monotonic() + within_s
    while True:
        runs = [OfflineRun(d) for d in sorted((save_dir / "wandb").glob("offline-run-*"))]
        if all(run.exit_code is not None for run in runs) or time.monotonic() > deadline:
            return runs
        time.sleep(0.1)  # poll interval while the exit record is being written
