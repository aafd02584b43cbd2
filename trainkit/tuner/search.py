"""A tuner's search inside a running stage, and putting the stage back as it was afterwards.

The weights, optimizers, schedulers, precision scaler and callback states go back through a
checkpoint of the run (``checkpoint/state.py``: written before the search, restored after it,
then removed); the loop position, limits, training step and every RNG state are kept aside and
put back. What the stage was given (callbacks, loggers, loaders: ``state.given``, frozen) is
never changed: a search's trials replace it whole with a copy, and the stage's own goes back
when the search ends. So a fit after a search trains exactly as one without it.
"""

from __future__ import annotations

import dataclasses
import gc
import uuid
from pathlib import Path
from types import TracebackType
from typing import Any

import torch

from trainkit.checkpoint import state as checkpoint_state
from trainkit.seed import collect_rng_states, restore_rng_states
from trainkit.state import LoopLimits, LoopPosition, RunState, StageInputs


class TunerExit(Exception):
    """Ends a stage that ran only to tune (``Tuner``): the runner ends it as a success."""


@dataclasses.dataclass
class Kept:
    """What a search changes in the run state, as it was before."""

    position: LoopPosition
    should_stop: bool
    resume: Any
    limits: LoopLimits
    given: StageInputs
    lr_scheduler_configs: list[Any]
    stepper: Any
    preemption: Any
    epoch_start_rng: Any
    metric_store: Any
    train_store: Any
    rng: dict[str, Any]


class Search:
    """``with Search(state, "lr_find"):`` runs a search on the stage's module and puts the stage
    back as it was when the block ends (every rank enters and leaves it together)."""

    def __init__(self, state: RunState, name: str) -> None:
        self.state = state
        self.name = name
        self.path = ""
        self.kept: Kept | None = None

    def __enter__(self) -> Search:
        state = self.state
        strategy = state.strategy
        self.kept = self._keep()
        state.preemption = None  # so the save below is complete on disk when it returns
        path = str(Path(state.default_root_dir) / f".{self.name}_{uuid.uuid4().hex}.ckpt")
        self.path = strategy.broadcast(path)  # rank 0's name: the file it writes
        try:
            checkpoint_state.save(state, self.path)
            strategy.barrier()
        except BaseException:
            self._put_back(self.kept)
            raise
        state.given = dataclasses.replace(state.given, loggers=[])  # a search logs nothing
        state.stop.should_stop = False
        state.stop.resume = None  # a resumed fit's pending RNG states and skip wait for its loop
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        state, kept = self.state, self.kept
        assert kept is not None
        strategy = state.strategy
        try:
            free_memory(state)
            self._put_back(kept)
            # after a failure the other ranks may be gone: restore the weights in one process only
            if error is None or not strategy.is_distributed:
                checkpoint_state.restore(state, self.path, full=True, weights_only=False)
                self._put_back(kept)  # the restore wrote the checkpoint's loop position
            restore_rng_states(kept.rng)
            if error is None:
                strategy.barrier()  # every rank has read the file
        finally:
            if strategy.is_global_zero:
                checkpoint_state.checkpoint_io(state).remove_checkpoint(self.path)

    def _keep(self) -> Kept:
        state = self.state
        return Kept(
            position=dataclasses.replace(state.position),
            should_stop=state.stop.should_stop,
            resume=state.stop.resume,
            limits=state.limits,
            given=state.given,
            lr_scheduler_configs=state.lr_scheduler_configs,
            stepper=state.stepper,
            preemption=state.preemption,
            epoch_start_rng=state.epoch_start_rng,
            metric_store=state.metrics.active,
            train_store=state.metrics.train_store,
            rng=collect_rng_states(),
        )

    def _put_back(self, kept: Kept) -> None:
        state = self.state
        for field in dataclasses.fields(LoopPosition):  # in place: a running loop holds it
            setattr(state.position, field.name, getattr(kept.position, field.name))
        state.stop.should_stop = kept.should_stop
        state.stop.resume = kept.resume
        state.limits = kept.limits
        state.given = kept.given
        state.lr_scheduler_configs = kept.lr_scheduler_configs
        state.stepper = kept.stepper
        state.preemption = kept.preemption
        state.epoch_start_rng = kept.epoch_start_rng
        state.metrics.active = kept.metric_store
        state.metrics.train_store = kept.train_store

    def start_position(self) -> None:
        """Put the loop back where the search started (each trial starts there)."""
        kept = self.kept
        assert kept is not None
        for field in dataclasses.fields(LoopPosition):
            setattr(self.state.position, field.name, getattr(kept.position, field.name))
        self.state.stop.should_stop = False

    def limits(self, **changes: int | float) -> LoopLimits:
        """The stage's loop limits with ``changes`` (what a search runs under)."""
        assert self.kept is not None
        return dataclasses.replace(self.kept.limits, **changes)

    @property
    def start_step(self) -> int:
        """The global step the search started at."""
        assert self.kept is not None
        return self.kept.position.global_step


def free_memory(state: RunState) -> None:
    """Drop the gradients and cached blocks a failed or finished trial left behind."""
    for optimizer in state.optimizers:
        optimizer.zero_grad(set_to_none=True)
    gc.collect()
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        torch.cuda.empty_cache()
