"""Trainer plugins (Lightning's ``plugins=`` argument): how checkpoints are written.

``Trainer(plugins=[AsyncCheckpointIO()])`` or, in a config, ``trainer: {plugins: AsyncCheckpointIO}``
saves checkpoints in a background thread (see trainkit.checkpoint.async_io); the default is
TorchCheckpointIO, an atomic ``torch.save`` that training waits for. ``Precision`` is the class
of ``trainer.precision_plugin`` (the precision itself is ``Trainer(precision=...)``); the
submodules ``io`` and ``precision`` are Lightning's paths to the same classes.
"""

from __future__ import annotations

from trainkit.checkpoint.async_io import AsyncCheckpointIO, CheckpointWriteError
from trainkit.checkpoint.checkpoint_io import CheckpointIO, TorchCheckpointIO
from trainkit.errors import ConfigError
from trainkit.strategies.precision import Precision

__all__ = [
    "AsyncCheckpointIO",
    "CheckpointIO",
    "CheckpointWriteError",
    "Precision",
    "TorchCheckpointIO",
    "checkpoint_io_from",
]


def checkpoint_io_from(plugins: object) -> CheckpointIO:
    """The CheckpointIO among the Trainer's ``plugins`` (None, one plugin or a list of them)."""
    given = plugins if isinstance(plugins, list | tuple) else [plugins]
    expected = "AsyncCheckpointIO(), TorchCheckpointIO() or another CheckpointIO, at most one"
    chosen: list[CheckpointIO] = []
    for plugin in given:
        if plugin is None:
            continue
        if not isinstance(plugin, CheckpointIO):
            raise ConfigError(
                "trainer.plugins", plugin, expected, "e.g. plugins: AsyncCheckpointIO"
            )
        chosen.append(plugin)
    if len(chosen) > 1:
        names = [type(plugin).__name__ for plugin in chosen]
        raise ConfigError("trainer.plugins", names, expected, "keep one CheckpointIO")
    return chosen[0] if chosen else TorchCheckpointIO()
