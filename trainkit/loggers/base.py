"""Logger: where scalars and hyperparameters go; every logger of a run shares one folder."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from torch import nn

_VERSION = re.compile(r"version_(\d+)$")
JOIN_CHAR = "-"  # between a logger's prefix and a metric name, as in Lightning


def next_version(root: str | os.PathLike) -> int:
    """The first ``version_N`` number not yet used under ``root``."""
    root = Path(root)
    if not root.is_dir():
        return 0
    used = [int(m.group(1)) for p in root.iterdir() if (m := _VERSION.match(p.name))]
    return max(used) + 1 if used else 0


class SavedCheckpoints(Protocol):
    """What a logger reads of the checkpoint callback that saved (``ModelCheckpoint``'s members)."""

    @property
    def save_top_k(self) -> int: ...
    @property
    def best_k_models(self) -> Mapping[str, object]: ...
    @property
    def best_model_path(self) -> str: ...
    @property
    def last_model_path(self) -> str: ...


class Logger:
    """Base class: ``save_dir/name/version_N[/sub_dir]``; subclasses write metrics there. A
    subclass may define ``name``, ``version`` and ``save_dir`` as read-only properties instead
    (Lightning's custom loggers do)."""

    # capability: its hyperparameters are a file of the user's own (Lightning's hparams.yaml of
    # CSVLogger), so it is given the module's hyperparameters without the startup table's rows
    keeps_hparams_file: bool = False
    # capability: a folder logger given no save_dir: the Trainer sets its default_root_dir
    follows_root_dir: bool = False

    def __init__(
        self,
        save_dir: str | None = ".",
        name: str | None = "trainkit_logs",
        version: int | str | None = None,
        prefix: str = "",
        sub_dir: str | None = None,
    ) -> None:
        # None: a folder logger left to the Trainer's default_root_dir (the cwd until then)
        self.follows_root_dir = save_dir is None
        self._save_dir: str | None = "." if save_dir is None else str(save_dir)
        self._name = name or ""
        self._version = version
        self.prefix = prefix
        self.sub_dir = sub_dir

    @property
    def save_dir(self) -> str | None:
        """The local folder of this logger's runs (None: it keeps none, as a remote store)."""
        return self._save_dir

    @save_dir.setter
    def save_dir(self, value: str | None) -> None:
        self._save_dir = value

    @property
    def name(self) -> str:
        return self._name

    @name.setter
    def name(self, value: str) -> None:
        self._name = value

    @property
    def version(self) -> int | str | None:
        return self._version

    @version.setter
    def version(self, value: int | str | None) -> None:
        self._version = value

    @property
    def root_dir(self) -> str:
        """Where the ``version_N`` folders are: ``save_dir/name`` (or ``save_dir`` without a name)."""
        save_dir = self.save_dir or "."
        return str(Path(save_dir) / self.name) if self.name else save_dir

    @property
    def log_dir(self) -> str:
        if self.version is None:
            self.version = next_version(self.root_dir)
        version = self.version if isinstance(self.version, str) else f"version_{self.version}"
        folder = Path(self.root_dir) / version
        return str(folder / self.sub_dir) if self.sub_dir else str(folder)

    @property
    def view_command(self) -> str | None:
        """The command that shows this logger's records, for the closing lines (None: none)."""
        return None

    def prefixed(self, metrics: dict[str, float]) -> dict[str, float]:
        """``metrics`` with this logger's prefix joined to every name (``prefix-name``)."""
        if not self.prefix:
            return metrics
        return {f"{self.prefix}{JOIN_CHAR}{key}": value for key, value in metrics.items()}

    def log_metrics(self, metrics: dict[str, float], step: int) -> None:
        raise NotImplementedError

    def log_hyperparams(self, params: dict[str, Any]) -> None: ...

    def log_graph(self, model: nn.Module, input_array: object = None) -> None:
        """Record the model's graph (loggers that can; called once at fit start)."""

    def after_save_checkpoint(self, checkpoint_callback: SavedCheckpoints) -> None:
        """Called by ModelCheckpoint after each save (loggers that upload checkpoints)."""

    def save(self) -> None: ...

    def finalize(self, status: str) -> None:
        self.save()
