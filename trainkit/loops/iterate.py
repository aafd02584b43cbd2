"""Starting to iterate a DataLoader safely while collectives may be in flight, and how each
batch then reaches the device."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from trainkit.common.hooks import overrides
from trainkit.distributed.fork_safety import forks_workers, let_collective_threads_leave_python

if TYPE_CHECKING:
    from trainkit.datamodule import DataModule
    from trainkit.loops.preemption import Preemption
    from trainkit.module import TrainModule
    from trainkit.strategies.base import Strategy


def start_iterating(
    loader: Iterable[object], preemption: Preemption | None = None
) -> Iterator[Any]:
    """``iter(loader)``; when that forks workers, the agreement round of ``preemption`` (if any)
    settles first and collective threads leave Python (see fork_safety)."""
    if forks_workers(loader):
        if preemption is not None:
            preemption.settle()
        let_collective_threads_leave_python()
    return iter(loader)


TRANSFER_HOOKS = ("on_before_batch_transfer", "transfer_batch_to_device", "on_after_batch_transfer")


def batch_transfer(
    strategy: Strategy,
    module: TrainModule,
    datamodule: DataModule | None = None,
    dataloader_idx: int = 0,
) -> Callable[[Any], Any] | None:
    """How a batch of loader ``dataloader_idx`` reaches the device: the strategy's way (None: it
    is there already), or, when the module or the data module overrides one of Lightning's
    transfer hooks, through all three of them (each the data module's where it overrides it)."""
    from trainkit.datamodule import DataModule
    from trainkit.module import TrainModule

    def owner(hook: str) -> TrainModule | DataModule:
        if datamodule is not None and overrides(datamodule, DataModule, hook):
            return datamodule
        return module

    owners = [owner(hook) for hook in TRANSFER_HOOKS]
    if all(
        o is module and not overrides(module, TrainModule, h)
        for o, h in zip(owners, TRANSFER_HOOKS)
    ):
        return strategy.batch_transfer_fn()
    before, to_device, after = (getattr(o, hook) for o, hook in zip(owners, TRANSFER_HOOKS))
    device = strategy.root_device

    def transfer(batch: object) -> Any:
        batch = before(batch, dataloader_idx)
        batch = to_device(batch, device, dataloader_idx)
        return after(batch, dataloader_idx)

    return transfer
