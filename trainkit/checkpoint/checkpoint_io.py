"""CheckpointIO: how checkpoint files are written and read (Lightning's plugin API), and
TorchCheckpointIO, the default: atomic ``torch.save`` (temp file, fsync, rename) on this thread."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from torch.serialization import MAP_LOCATION


class CheckpointIO:
    """Writes, reads and removes checkpoint files; the Trainer calls it on the writing rank(s)."""

    def save_checkpoint(
        self, checkpoint: dict[str, Any], path: str | os.PathLike, storage_options: object = None
    ) -> None:
        """Write ``checkpoint`` to ``path`` (never visible there half-written)."""
        raise NotImplementedError(f"{type(self).__name__} does not implement save_checkpoint")

    def load_checkpoint(
        self, path: str | os.PathLike, map_location: MAP_LOCATION = "cpu", weights_only: bool = True
    ) -> dict[str, Any]:
        """Read the checkpoint at ``path``."""
        raise NotImplementedError(f"{type(self).__name__} does not implement load_checkpoint")

    def remove_checkpoint(self, path: str | os.PathLike) -> None:
        """Delete the checkpoint at ``path`` (a file or a sharded folder), if it exists."""
        import shutil

        path = Path(path)
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink(missing_ok=True)

    def save_sharded_checkpoint(
        self,
        checkpoint: dict[str, Any],
        path: str | os.PathLike,
        is_writer: bool,
        barrier: Callable[[], None],
    ) -> None:
        """Every rank writes its shards (a collective); the folder appears at ``path`` once
        complete (used by fsdp with ``state_dict_type='sharded'``)."""
        from trainkit.checkpoint.files import save_sharded_checkpoint

        save_sharded_checkpoint(checkpoint, path, is_writer, barrier)

    def wait(self) -> None:
        """Return once every save started so far is on disk (nothing to wait for here)."""

    def teardown(self) -> None:
        """The end of a stage: finish what is in flight, release what the plugin holds."""
        self.wait()


class TorchCheckpointIO(CheckpointIO):
    """The default: ``torch.save`` to a temp file, fsync, rename over ``path``, fsync the folder;
    ``torch.load`` (weights-only unless you opt out) to read."""

    def save_checkpoint(
        self, checkpoint: dict[str, Any], path: str | os.PathLike, storage_options: object = None
    ) -> None:
        """Write ``checkpoint`` atomically, blocking until it is on disk."""
        from trainkit.checkpoint.files import save_checkpoint

        if storage_options is not None:
            raise TypeError(
                f"TorchCheckpointIO.save_checkpoint got storage_options={storage_options!r}; "
                "expected None: it writes local files only"
            )
        save_checkpoint(checkpoint, path)

    def load_checkpoint(
        self, path: str | os.PathLike, map_location: MAP_LOCATION = "cpu", weights_only: bool = True
    ) -> dict[str, Any]:
        """Read a checkpoint file (or a sharded checkpoint folder, as one dict)."""
        from trainkit.checkpoint.files import load_checkpoint

        return load_checkpoint(path, map_location=map_location, weights_only=weights_only)
