"""The parts the loops call through the run state, typed by what the loops use of them: the
rank board, the hook dispatcher, the metric hub, the training step, the preemption watch and the
latest predict's record; and the run state as the Trainer's public ``run_state`` shows it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import torch

    from trainkit.checkpoint.checkpoint_io import CheckpointIO
    from trainkit.metrics import MetricStore
    from trainkit.state.position import LoopPosition


class RankMarker(Protocol):
    """Marks where this rank is on the rank board (distributed/rank_board.py's RankBoard)."""

    def mark(self, phase: int, epoch: int | None = None, batch: int | None = None) -> None: ...


class Hooks(Protocol):
    """Calls the module's and the callbacks' hooks (loops/hooks.py's HookDispatcher)."""

    def bound(self, name: str) -> list[Callable[..., Any]]: ...
    def call(self, name: str, *args: object) -> None: ...
    def call_callbacks(
        self, name: str, *args: object, only: list[Any] | None = None, **kwargs: object
    ) -> None: ...


class Metrics(Protocol):
    """Where ``self.log`` records and what the loggers and callbacks read (the MetricHub)."""

    active: MetricStore | None  # the store self.log records into now (None between stages)
    train_store: MetricStore | None
    epoch_metrics: dict[str, torch.Tensor]
    stepped_in_batch: bool  # the training batch running stepped (the loggers' axis: not yet)

    @property
    def callback_metrics(self) -> dict[str, torch.Tensor | float]: ...
    @property
    def logged_metrics(self) -> dict[str, float]: ...
    @property
    def progress_bar_metrics(self) -> dict[str, Any]: ...
    def reset(self) -> None: ...
    def new_store(self, stage: str) -> MetricStore: ...
    def new_train_store(self) -> MetricStore: ...
    def record_eval(self, store: MetricStore, results: list[dict[str, torch.Tensor]]) -> None: ...
    def log_step(self, store: MetricStore) -> None: ...
    def reduce_train_epoch(self, store: MetricStore) -> None: ...
    def log_to_loggers(
        self,
        metrics: dict[str, float],
        step: int | None = None,
        epoch: int | None = None,
        record: bool = True,
    ) -> None: ...
    def log_eval_step(self, store: MetricStore, loader_idx: int) -> None: ...


class Stepper(Protocol):
    """One training batch: forward, backward, optimizer step (loops/training_step.py)."""

    forward: Callable[[Any, int], Any]

    @property
    def manual_optimizers(self) -> Sequence[Any]:  # loops/manual_optimizer.py
        """What a manually optimized module's ``self.optimizers()`` returns."""
        ...

    def set_accumulation(self, batches: int) -> None: ...
    def run(self, batch: object, batch_idx: int, boundary: bool) -> Any: ...
    def backward(self, loss: torch.Tensor, *args: Any, **kwargs: Any) -> None: ...


class StopWatch(Protocol):
    """Watches for stop signals during a fit (loops/preemption.py's Preemption)."""

    def should_stop(self, can_stop: bool) -> bool: ...
    def save_and_stop(self) -> None: ...
    def settle(self) -> None: ...


class PredictRecord(Protocol):
    """What the latest predict collected (loops/predict.py's PredictLoop), for prediction writers."""

    epoch_batch_indices: list[list[list[int]]]  # per loader, per batch: the dataset indices
    current_batch_indices: list[int]

    @property
    def predictions(self) -> list[Any]: ...


class RunStateView(Protocol):
    """The run state as ``trainer.run_state`` shows it to callbacks, the module and the tuner
    (state/run.py's RunState). A Protocol, so that the Trainer's view names no module that
    names the callbacks."""

    @property
    def position(self) -> LoopPosition: ...
    @property
    def metrics(self) -> Metrics: ...
    @property
    def stepper(self) -> Stepper | None: ...
    @property
    def checkpoint_io(self) -> CheckpointIO | None: ...
