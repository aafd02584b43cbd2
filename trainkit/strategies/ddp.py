"""The DDP family: one process per device, gradients all-reduced by DistributedDataParallel.
``DDPStrategy`` re-runs the command per rank; ``DDPSpawnStrategy`` starts the ranks from this
Python process (spawn or fork) and returns rank 0's result to the caller."""

from __future__ import annotations

import contextlib
import dataclasses
import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeGuard, cast

import torch
from torch import nn

from trainkit.distributed.launchers.choice import REEXEC_METHOD, START_METHODS
from trainkit.distributed.launchers.reexec import can_reexecute
from trainkit.errors import ConfigError
from trainkit.strategies.base import Placement
from trainkit.strategies.parallel import ParallelStrategy, average_gradients
from trainkit.strategies.step_forwarder import StepForwarder

if TYPE_CHECKING:
    from trainkit.module import TrainModule


def manual_under_ddp(
    wrapped: nn.Module, module: TrainModule
) -> TypeGuard[nn.parallel.DistributedDataParallel]:
    """Whether a manually optimized module runs in torch's own DDP wrapper."""
    is_ddp = type(wrapped) is nn.parallel.DistributedDataParallel
    return is_ddp and not module.automatic_optimization


def unsynced_step(wrapped: nn.parallel.DistributedDataParallel, *args: object) -> Any:
    """The training step through DDP (buffers broadcast) with its gradient reducer off."""
    with wrapped.no_sync():
        return wrapped(*args)


@dataclasses.dataclass(frozen=True)
class DDPOptions:
    """The DistributedDataParallel wrapper's settings, as given to the constructor."""

    find_unused_parameters: bool = False
    static_graph: bool = False
    gradient_as_bucket_view: bool = False


class DDPStrategy(ParallelStrategy):
    """Data parallel across processes: each rank holds a full replica and a data shard."""

    name = "ddp"

    def __init__(
        self,
        find_unused_parameters: bool = False,
        static_graph: bool = False,
        gradient_as_bucket_view: bool = False,
        process_group_backend: str | None = None,
        timeout: float | None = None,
        start_method: str | None = None,
    ) -> None:
        """
        Args:
            find_unused_parameters: Let DDP skip parameters a step did not use (slower).
            static_graph: Tell DDP the graph is the same every step (faster, fewer checks).
            gradient_as_bucket_view: Gradients as views into DDP's buckets (saves memory).
            process_group_backend: Override the backend (gloo on CPU, nccl on GPU).
            timeout: Seconds a collective waits for a late rank before the job fails (default
                $TRAINKIT_COLLECTIVE_TIMEOUT, else torch's 30 minutes).
            start_method: How the ranks start: 'popen' re-runs the command per rank (ddp's
                default); 'spawn' or 'fork' start them from this Python process and return rank
                0's result (ddp_spawn's default: spawn, or fork where this session cannot be
                re-imported: a notebook, stdin, ``python -c``).
        """
        super().__init__(process_group_backend, timeout)
        self.options = DDPOptions(find_unused_parameters, static_graph, gradient_as_bucket_view)
        self.start_method = start_method or self.default_start_method()

    @staticmethod
    def default_start_method() -> str:
        return REEXEC_METHOD

    def connect(self, placement: Placement) -> None:
        if self.start_method not in START_METHODS:
            raise ConfigError(
                "start_method",
                self.start_method,
                f"one of {', '.join(START_METHODS)}",
                "popen re-runs the command per rank; spawn and fork start the ranks from this "
                "Python process",
            )
        super().connect(placement)

    def setup_module(self, module: nn.Module) -> nn.Module:
        module = self.with_batchnorm_synced(module).to(self.root_device)
        return self.configure_ddp(StepForwarder(module))

    def configure_ddp(self, forwarder: nn.Module) -> nn.Module:
        """Wrap the module in DDP (override to customise the wrapper)."""
        device_ids = [self.root_device.index] if self.root_device.type == "cuda" else None
        return nn.parallel.DistributedDataParallel(
            forwarder,
            device_ids=device_ids,
            find_unused_parameters=self.options.find_unused_parameters,
            static_graph=self.options.static_graph,
            gradient_as_bucket_view=self.options.gradient_as_bucket_view,
        )

    def training_step_fn(
        self, wrapped: nn.Module, module: TrainModule
    ) -> Callable[[Any, int], Any]:
        if manual_under_ddp(wrapped, module):
            return functools.partial(unsynced_step, wrapped)
        return wrapped

    def manual_gradient_sync_fn(
        self, wrapped: nn.Module, module: TrainModule
    ) -> Callable[[list[torch.Tensor]], None] | None:
        """Manual optimization under DDP: every ``manual_backward`` averages the gradients
        itself (DDP's reducer expects one backward per forward; a GAN step has two)."""
        return average_gradients if manual_under_ddp(wrapped, module) else None

    def no_backward_sync(self, wrapped: nn.Module) -> contextlib.AbstractContextManager:
        # setup_module wrapped the module in DDP (configure_ddp)
        return cast(nn.parallel.DistributedDataParallel, wrapped).no_sync()

    def forked_twin(self) -> ParallelStrategy:
        """In an interactive session: ddp_spawn with these settings, its ranks forked."""
        twin = DDPSpawnStrategy(
            **dataclasses.asdict(self.options),
            process_group_backend=self.process_group_backend,
            timeout=self.timeout,
            start_method="fork",
        )
        twin.connect(self.placement)
        return twin


class DDPSpawnStrategy(DDPStrategy):
    """Like ddp, but ranks start with torch.multiprocessing (``start_method`` spawn or fork);
    results return to the caller."""

    name = "ddp_spawn"

    @staticmethod
    def default_start_method() -> str:
        """spawn; fork where classes defined in an interactive ``__main__`` exist only in this
        process."""
        return "spawn" if can_reexecute() else "fork"
