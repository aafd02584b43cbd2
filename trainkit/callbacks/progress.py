"""ProgressBar: the base of progress bars, and trainkit's default one: rich bars on a terminal,
otherwise (a log file) a line every 30 s during an epoch and one summary line per epoch;
global rank 0 only."""

from __future__ import annotations

import importlib
import math
import os
import time
from typing import TYPE_CHECKING, Any, Protocol

from trainkit.callbacks.base import Callback
from trainkit.metrics import to_float

if TYPE_CHECKING:
    from trainkit.module import TrainModule
    from trainkit.trainer.trainer import Trainer


PROGRESS_SECONDS_ENV = "TRAINKIT_PROGRESS_SECONDS"  # without bars: a line at most this often
DEFAULT_LINE_EVERY_S = 30.0


class Bars(Protocol):
    """What draws the bars (rich or tqdm): one training bar and one evaluation bar at a time."""

    def start(self) -> None: ...
    def stop(self) -> None: ...
    def train_start(self, description: str, total: int | None) -> None: ...
    def train_update(self, completed: int, metrics: str) -> None: ...
    def eval_start(self, description: str, total: int | None) -> None: ...
    def eval_update(self, completed: int, total: int | None) -> None: ...
    def eval_end(self) -> None: ...


class ProgressBar(Callback):
    """Show progress and the ``prog_bar`` metrics: rich bars on a terminal, else a line an epoch.

    Global rank 0 only. Subclasses (RichProgressBar, TQDMProgressBar) always draw bars; the
    Trainer adds no default bar when one is given."""

    order = 30  # runs after other callbacks, once epoch metrics are reduced

    def __init__(
        self,
        refresh_rate: int = 10,
        force_rich: bool | None = None,
        line_every_s: float | None = None,
    ) -> None:
        """
        Args:
            refresh_rate: Redraw every N batches (0: no bar).
            force_rich: Draw rich bars (True) or print lines (False); None: rich on a
                terminal only.
            line_every_s: Without bars (a log file, a SLURM output file): also print a line
                during an epoch when this many seconds passed since the last one (0: a line
                per epoch only); None: $TRAINKIT_PROGRESS_SECONDS, else 30.
        """
        self._refresh_rate = refresh_rate
        self.force_rich = force_rich
        if line_every_s is None:
            line_every_s = float(os.environ.get(PROGRESS_SECONDS_ENV) or DEFAULT_LINE_EVERY_S)
        self.line_every_s = line_every_s
        self._enabled = True
        self._bars: Bars | None = None
        self._epoch_started = 0.0
        self._last_line = 0.0

    # ---- the base API (Lightning's ProgressBar) --------------------------------------------------
    @property
    def refresh_rate(self) -> int:
        return self._refresh_rate

    @property
    def is_enabled(self) -> bool:
        return self._enabled and self.refresh_rate > 0

    @property
    def is_disabled(self) -> bool:
        return not self.is_enabled

    def enable(self) -> None:
        """Show the bar (from the next update)."""
        self._enabled = True

    def disable(self) -> None:
        """Hide the bar (ranks other than 0 are always disabled)."""
        self._enabled = False

    def get_metrics(self, trainer: Trainer, pl_module: TrainModule) -> dict[str, int | str | float]:
        """What the bar shows: the ``prog_bar`` metrics, and ``v_num`` (the logger's version)."""
        metrics: dict[str, int | str | float] = {
            name: to_float(value) for name, value in trainer.progress_bar_metrics.items()
        }
        version = getattr(trainer.logger, "version", None)
        if version is not None:
            metrics["v_num"] = version[-4:] if isinstance(version, str) else version
        return metrics

    def epoch_description(self, trainer: Trainer) -> str:
        """The label of the training bar."""
        return f"epoch {trainer.current_epoch}"

    def metrics_text(self, trainer: Trainer, pl_module: TrainModule) -> str:
        """The metrics beside the training bar."""
        return "  ".join(f"{k}={to_float(v):.4g}" for k, v in trainer.progress_bar_metrics.items())

    def make_bars(self) -> Bars | None:
        """The drawing of this bar (None: a line per epoch instead)."""
        from trainkit.distributed.env import output_is_terminal  # mpirun's pty is no terminal

        use_rich = output_is_terminal() if self.force_rich is None else self.force_rich
        if not use_rich:
            return None
        from trainkit.callbacks.rich_bars import RichBars

        return RichBars(leave=False)

    # ---- hooks -----------------------------------------------------------------------------------
    def setup(self, trainer: Trainer, module: TrainModule, stage: str) -> None:
        if not trainer.is_global_zero:
            self.disable()
        if self.is_enabled and self._bars is None:
            self._bars = self.make_bars()
            if self._bars is not None:
                self._bars.start()

    def teardown(self, trainer: Trainer, module: TrainModule, stage: str) -> None:
        if self._bars is not None:
            self._bars.stop()
            self._bars = None

    def on_train_epoch_start(self, trainer: Trainer, module: TrainModule) -> None:
        self._epoch_started = self._last_line = time.perf_counter()
        if self._bars is not None:
            self._bars.train_start(
                self.epoch_description(trainer), _known(trainer.num_training_batches)
            )

    def on_train_batch_end(
        self,
        trainer: Trainer,
        module: TrainModule,
        outputs: object,
        batch: object,
        batch_idx: int,
    ) -> None:
        if self._bars is not None and (batch_idx + 1) % self.refresh_rate == 0:
            self._bars.train_update(batch_idx + 1, self.metrics_text(trainer, module))
        elif self._bars is None and self.is_enabled and self.line_every_s > 0:
            now = time.perf_counter()
            if now - self._last_line >= self.line_every_s:
                self._last_line = now
                total = _known(trainer.num_training_batches)
                print(
                    f"epoch {trainer.current_epoch}: batch {batch_idx + 1}"
                    f"{f'/{total}' if total else ''}  step {trainer.global_step}  "
                    f"{self.metrics_text(trainer, module)}  ({now - self._epoch_started:.1f}s)",
                    flush=True,
                )

    def on_train_epoch_end(self, trainer: Trainer, module: TrainModule) -> None:
        if self._bars is not None:
            self._bars.train_update(
                trainer.num_training_batches_seen, self.metrics_text(trainer, module)
            )
        elif self.is_enabled:
            seconds = time.perf_counter() - self._epoch_started
            print(
                f"epoch {trainer.current_epoch}: step {trainer.global_step}  "
                f"{self.metrics_text(trainer, module)}  ({seconds:.2f}s)",
                flush=True,
            )

    def _eval_start(self, trainer: Trainer, description: str) -> None:
        if self._bars is not None:
            self._bars.eval_start(description, _known(trainer.num_eval_batches) or None)

    def _eval_update(self, trainer: Trainer, batch_idx: int) -> None:
        if self._bars is not None and (batch_idx + 1) % self.refresh_rate == 0:
            self._bars.eval_update(batch_idx + 1, _known(trainer.num_eval_batches) or None)

    def _eval_end(self) -> None:
        if self._bars is not None:
            self._bars.eval_end()

    def on_validation_epoch_start(self, trainer: Trainer, module: TrainModule) -> None:
        self._eval_start(trainer, "Sanity Checking" if trainer.sanity_checking else "Validation")

    def on_validation_batch_end(
        self,
        trainer: Trainer,
        pl_module: TrainModule,
        outputs: object,
        batch: object,
        batch_idx: int,
        dataloader_idx: int = 0,
    ) -> None:
        self._eval_update(trainer, batch_idx)

    def on_validation_epoch_end(self, trainer: Trainer, pl_module: TrainModule) -> None:
        self._eval_end()

    def on_test_epoch_start(self, trainer: Trainer, module: TrainModule) -> None:
        self._eval_start(trainer, "Testing")

    on_test_batch_end = on_validation_batch_end  # the same update and end, under test's names
    on_test_epoch_end = on_validation_epoch_end


def _known(total: int | float) -> int | None:
    return None if total is None or total == math.inf else int(total)


def __getattr__(name: str) -> Any:
    """Lightning's ``callbacks.progress`` also holds RichProgressBar and TQDMProgressBar."""
    homes = {
        "RichProgressBar": "trainkit.callbacks.rich_progress",
        "RichProgressBarTheme": "trainkit.callbacks.rich_bars",
        "TQDMProgressBar": "trainkit.callbacks.tqdm_progress",
    }
    if name in homes:
        return getattr(importlib.import_module(homes[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
