"""OnExceptionCheckpoint: save a checkpoint when a stage fails with an exception."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from trainkit.callbacks.base import Checkpoint
from trainkit.distributed.comm import rank_zero_info
from trainkit.errors import ConfigError

if TYPE_CHECKING:
    from trainkit.module import TrainModule
    from trainkit.trainer.trainer import Trainer


class OnExceptionCheckpoint(Checkpoint):
    """Write ``dirpath/filename.ckpt`` when fit (or another stage) raises, to resume or inspect."""

    FILE_EXTENSION = ".ckpt"

    def __init__(self, dirpath: str | os.PathLike, filename: str = "on_exception") -> None:
        """
        Args:
            dirpath: Folder of the checkpoint file.
            filename: Its name, without the extension.
        """
        if not filename:
            raise ConfigError(
                "OnExceptionCheckpoint filename", filename, "a non-empty name without extension"
            )
        self.dirpath = os.fspath(dirpath)
        self.filename = filename

    @property
    def ckpt_path(self) -> str:
        """Where the checkpoint is written."""
        return os.path.join(self.dirpath, self.filename + self.FILE_EXTENSION)

    def on_exception(self, trainer: Trainer, module: TrainModule, exception: BaseException) -> None:
        if trainer.world_size > 1:  # the other ranks are not here to write their part
            rank_zero_info(
                f"OnExceptionCheckpoint: no checkpoint after {type(exception).__name__}: a "
                f"{trainer.world_size}-rank checkpoint needs every rank"
            )
            return
        try:
            trainer.save_checkpoint(self.ckpt_path)
        except Exception as error:  # never hide the exception that ended the run
            exception.add_note(f"OnExceptionCheckpoint could not save {self.ckpt_path}: {error}")
