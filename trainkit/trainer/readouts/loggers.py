"""The Trainer's loggers and metrics, as Lightning names them: ``loggers``/``logger``
(settable), the log folder, the CLI's recorded config, and the metrics the loops collected."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import torch

from trainkit.loggers.base import Logger
from trainkit.state import RunState


class LoggerReadouts:
    """The loggers, the log folder and the metrics (Lightning's names)."""

    run_state: RunState
    default_root_dir: str

    @property
    def loggers(self) -> list[Logger]:
        return self.run_state.given.loggers

    @loggers.setter
    def loggers(self, loggers: list[Logger] | None) -> None:
        state = self.run_state
        state.given = replace(state.given, loggers=list(loggers) if loggers else [])

    @property
    def logger(self) -> Logger | None:
        loggers = self.run_state.given.loggers
        return loggers[0] if loggers else None

    @logger.setter
    def logger(self, logger: Logger | None) -> None:
        state = self.run_state
        state.given = replace(state.given, loggers=[] if logger is None else [logger])

    @property
    def log_dir(self) -> str:
        return self.run_state.log_dir or self.default_root_dir

    @property
    def cli_config(self) -> str | None:
        """The resolved config a CLI run records in its log folder and checkpoints."""
        return self.run_state.cli_config

    @cli_config.setter
    def cli_config(self, text: str | None) -> None:
        self.run_state.cli_config = text

    @property
    def callback_metrics(self) -> dict[str, torch.Tensor | float]:
        """Latest step values and epoch aggregates, by name; what monitors read."""
        return self.run_state.metrics.callback_metrics

    @property
    def progress_bar_metrics(self) -> dict[str, Any]:
        return self.run_state.metrics.progress_bar_metrics

    @property
    def logged_metrics(self) -> dict[str, float]:
        """The latest value of each metric sent to the loggers."""
        return self.run_state.metrics.logged_metrics
