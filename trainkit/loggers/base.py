"""Logger: where scalars and hyperparameters go; every logger of a run shares one folder."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

_VERSION = re.compile(r"version_(\d+)$")


def next_version(root: str | os.PathLike) -> int:
    """The first ``version_N`` number not yet used under ``root``."""
    root = Path(root)
    if not root.is_dir():
        return 0
    used = [int(m.group(1)) for p in root.iterdir() if (m := _VERSION.match(p.name))]
    return max(used) + 1 if used else 0


class Logger:
    """Base class: ``save_dir/name/version_N``; subclasses write metrics there."""

    def __init__(
        self, save_dir: str = ".", name: str = "trainkit_logs", version: int | str | None = None
    ) -> None:
        self.save_dir = str(save_dir)
        self.name = name
        self.version = version

    @property
    def log_dir(self) -> str:
        if self.version is None:
            self.version = next_version(Path(self.save_dir) / self.name)
        version = self.version if isinstance(self.version, str) else f"version_{self.version}"
        return str(Path(self.save_dir) / self.name / version)

    def log_metrics(self, metrics: dict[str, float], step: int) -> None:
        raise NotImplementedError

    def log_hyperparams(self, params: dict[str, Any]) -> None: ...

    def save(self) -> None: ...

    def finalize(self, status: str) -> None:
        self.save()
