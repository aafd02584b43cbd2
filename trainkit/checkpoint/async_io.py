"""AsyncCheckpointIO: checkpoints that don't stall training.

Turn it on with ``Trainer(plugins=[AsyncCheckpointIO()])``, or in a config with
``trainer: {plugins: AsyncCheckpointIO}`` (``--trainer.plugins AsyncCheckpointIO``).

A save copies the checkpoint's tensors to host memory (training waits for that copy only: later
steps cannot change what is written), then a background thread, at a lower CPU priority (nice 10
on Linux), writes the copy (temp file, fsync, rename: never a partial file under the final name). At most one save is in flight: the next save
waits for the previous write. The end of fit, a preemption and a failed fit wait for the save in
flight; a failed write raises ``CheckpointWriteError`` on the training thread at the next save or
at the end of fit, in one line: for a full disk or an unwritable folder the same line as a save
on the training thread (the space, and the newest complete checkpoint there), else naming the
file. Under fsdp with ``state_dict_type='sharded'`` every rank stages its shards with
``torch.distributed.checkpoint.async_save`` (on its own gloo group) and the folder appears under
its name once every rank has written.

The price: host memory for one copy of the checkpoint, kept from save to save (later copies reuse
it, so they are plain memcpys) and freed at the end of fit.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from trainkit.checkpoint.checkpoint_io import CheckpointIO, TorchCheckpointIO
from trainkit.checkpoint.files import CheckpointWriteError
from trainkit.checkpoint.refused_writes import refused_write
from trainkit.checkpoint.snapshot import HostSnapshot

if TYPE_CHECKING:
    from pathlib import Path

    from torch.serialization import MAP_LOCATION


__all__ = ["AsyncCheckpointIO", "CheckpointWriteError"]


class AsyncCheckpointIO(CheckpointIO):
    """Saves checkpoints in a background thread: training waits only for a copy in host memory.

    ``checkpoint_io`` writes each copy (default: TorchCheckpointIO, atomic ``torch.save``); it must
    not keep the checkpoint it was given once its save returns (the copy's buffers are reused).
    """

    def __init__(self, checkpoint_io: CheckpointIO | None = None) -> None:
        """
        Args:
            checkpoint_io: What writes and reads the files (default: TorchCheckpointIO).
        """
        self.checkpoint_io = checkpoint_io if checkpoint_io is not None else TorchCheckpointIO()
        self._start_fresh()

    def _start_fresh(self) -> None:
        self._snapshot = HostSnapshot()
        self._executor: ThreadPoolExecutor | None = None
        self._in_flight: Future | None = None
        self._in_flight_path = ""
        self._group: Any = None  # the gloo group DCP's background collectives run on

    def save_checkpoint(
        self, checkpoint: dict[str, Any], path: str | os.PathLike, storage_options: object = None
    ) -> None:
        """Wait for the save in flight, copy ``checkpoint`` to host memory, write it in the
        background."""
        self.wait()
        copied = self._snapshot.take(checkpoint)
        self._submit(path, self.checkpoint_io.save_checkpoint, copied, path, storage_options)

    def save_sharded_checkpoint(
        self,
        checkpoint: dict[str, Any],
        path: str | os.PathLike,
        is_writer: bool,
        barrier: Callable[[], None],
    ) -> None:
        """Every rank stages its shards in host memory (``dcp.async_save``) and writes them in
        the background; the writer rank then adds trainkit.pt and renames the folder."""
        import torch.distributed as dist
        import torch.distributed.checkpoint as dcp

        from trainkit.checkpoint.files import sharded_temp_folder, split_shards

        self.wait()
        tmp = sharded_temp_folder(path, is_writer, barrier)
        if self._group is None:  # every rank creates it, at the same save
            self._group = dist.new_group(backend="gloo")
        response = dcp.async_save(
            split_shards(checkpoint), checkpoint_id=str(tmp), process_group=self._group
        )
        upload = response if isinstance(response, Future) else response.upload_completion
        rest = self._snapshot.take(checkpoint) if is_writer else None
        self._submit(path, _finish_sharded, upload, rest, tmp, path)

    def load_checkpoint(
        self, path: str | os.PathLike, map_location: MAP_LOCATION = "cpu", weights_only: bool = True
    ) -> dict[str, Any]:
        """Read a checkpoint (after the save in flight, which may be this very file)."""
        self.wait()
        return self.checkpoint_io.load_checkpoint(
            path, map_location=map_location, weights_only=weights_only
        )

    def remove_checkpoint(self, path: str | os.PathLike) -> None:
        """Delete a checkpoint (after the save in flight, which may be this very file)."""
        self.wait()
        self.checkpoint_io.remove_checkpoint(path)

    def wait(self) -> None:
        """Block until the save in flight is on disk; raise CheckpointWriteError if it failed."""
        future, path = self._in_flight, self._in_flight_path
        if future is None:
            return
        error = future.exception()  # blocks; an interrupt here leaves the save in flight
        self._in_flight = None
        if isinstance(error, CheckpointWriteError):  # already the one line a save says
            raise CheckpointWriteError(str(error)) from error
        if error is not None:
            raise CheckpointWriteError(
                refused_write(path, error, needed=None)
                or f"writing checkpoint {path!r} in the background failed ({type(error).__name__}: "
                f"{error}); that name still holds the previous checkpoint, if any; fix the cause "
                "and resume from the last complete checkpoint"
            ) from error

    def teardown(self) -> None:
        """Wait for the save in flight (raising its failure), stop the thread, free the copy."""
        try:
            self.wait()
        finally:
            if self._executor is not None:
                self._executor.shutdown(wait=True)
                self._executor = None
            self._snapshot.release()

    def _submit(self, path: str | os.PathLike, write: Callable[..., object], *args: object) -> None:
        if self._executor is None:
            self._executor = ThreadPoolExecutor(
                1, thread_name_prefix="trainkit-checkpoint", initializer=_yield_to_training
            )
        self._in_flight_path = os.fspath(path)
        self._in_flight = self._executor.submit(write, *args)

    def __getstate__(self) -> dict[str, Any]:
        """Picklable for spawned ranks: threads, futures, buffers and groups stay behind."""
        runtime = ("_snapshot", "_executor", "_in_flight", "_in_flight_path", "_group")
        return {k: v for k, v in self.__dict__.items() if k not in runtime}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._start_fresh()


WRITER_NICENESS = 10  # measured on 2 busy cores: steps beside a write no longer slow down


def _yield_to_training() -> None:
    """Lower the writer thread's CPU priority (Linux, this thread only): where training keeps every
    core busy, the write takes longer rather than the steps."""
    import sys
    import threading

    if sys.platform.startswith("linux"):  # elsewhere setpriority would renice the whole process
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), WRITER_NICENESS)


def _finish_sharded(
    upload: Future, rest: dict[str, Any] | None, tmp: Path, path: str | os.PathLike
) -> None:
    """Once this rank's shards are written (on the writer: every rank's), move the folder."""
    from trainkit.checkpoint.files import commit_sharded

    upload.result()
    if rest is not None:
        commit_sharded(rest, tmp, path)
