"""The per-batch skeleton that evaluation and predict share: up to ``total`` batches of one
loader, each moved to the device, passed through the batch-start hooks, stepped under the
precision's autocast, and passed to the batch-end hooks with the step's output."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from trainkit.loops.iterate import start_iterating
from trainkit.state import RunState


@dataclass(frozen=True)
class BatchCalls:
    """What a loop calls per batch: its step and hooks, and its own work around them."""

    step: Callable[..., Any]  # (batch, batch_idx, *extra) -> output
    start_hooks: list[Callable[..., Any]]  # (batch, batch_idx, *extra)
    end_hooks: list[Callable[..., Any]]  # (output, batch, batch_idx, *extra)
    seen: Callable[[Any, int], None]  # (batch, batch_idx): the batch as the loader gave it
    stepped: Callable[[Any], Any] | None = None  # output -> what the end hooks get
    ended: Callable[[], None] | None = None  # after the end hooks


def run_batches(
    state: RunState,
    calls: BatchCalls,
    loader: Iterable[Any],
    total: int | float,
    to_device: Callable[[Any], Any] | None,
    extra: tuple[int, ...],
) -> None:
    """Up to ``total`` batches of ``loader``; ``extra``: the ``dataloader_idx`` that Lightning's
    hooks and steps get when there are several loaders."""
    step, start_hooks, end_hooks = calls.step, calls.start_hooks, calls.end_hooks
    seen, stepped, ended = calls.seen, calls.stepped, calls.ended
    autocast = state.precision.autocast
    for batch_idx, batch in enumerate(start_iterating(loader, state.preemption)):
        if batch_idx >= total:
            break
        seen(batch, batch_idx)
        if to_device is not None:
            batch = to_device(batch)
        for hook in start_hooks:
            hook(batch, batch_idx, *extra)
        with autocast():
            output = step(batch, batch_idx, *extra)
        if stepped is not None:
            output = stepped(output)
        for hook in end_hooks:
            hook(output, batch, batch_idx, *extra)
        if ended is not None:
            ended()
