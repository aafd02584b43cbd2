"""DDPStrategy: one process per device, gradients all-reduced by DistributedDataParallel."""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import functools
import os
import warnings
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from trainkit.distributed.comm import all_reduce
from trainkit.distributed.rendezvous import rendezvous_store
from trainkit.errors import ConfigError
from trainkit.strategies.base import ParallelStrategy, Placement

BACKEND_ENV = "TRAINKIT_DISTRIBUTED_BACKEND"
BACKENDS = ("gloo", "nccl", "mpi", "ucc")
TIMEOUT_ENV = "TRAINKIT_COLLECTIVE_TIMEOUT"


def resolve_backend(accelerator: str, requested: str | None = None) -> str:
    """nccl on GPU, gloo on CPU, unless ``requested`` or $TRAINKIT_DISTRIBUTED_BACKEND says."""
    source = "process_group_backend"
    if requested is None and os.environ.get(BACKEND_ENV):
        requested, source = os.environ[BACKEND_ENV], BACKEND_ENV
    if requested is None:
        return "nccl" if accelerator == "gpu" else "gloo"
    backend = requested.strip().lower()
    if backend not in BACKENDS:
        raise ConfigError(
            source, requested, f"one of {', '.join(BACKENDS)}", "unset it for the default"
        )
    if backend == "nccl" and accelerator != "gpu":
        raise ConfigError(source, requested, "gloo on CPU", "nccl needs GPUs; use gloo")
    return backend


def collective_timeout(timeout: float | None) -> float | None:
    """Seconds a collective may wait: ``timeout``, else $TRAINKIT_COLLECTIVE_TIMEOUT, else None
    (torch's default)."""
    source, value = "strategy timeout", timeout
    if value is None and os.environ.get(TIMEOUT_ENV):
        source, value = TIMEOUT_ENV, os.environ[TIMEOUT_ENV]
    if value is None:
        return None
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        seconds = -1.0
    if not 0 < seconds < 10**9:
        raise ConfigError(source, value, "seconds > 0", "e.g. 600 for ten minutes")
    return seconds


BATCHNORMS = (nn.BatchNorm1d, nn.BatchNorm2d, nn.BatchNorm3d, nn.SyncBatchNorm)


def _destroy_process_group() -> None:
    if dist.is_initialized():
        dist.destroy_process_group()


def manual_under_ddp(wrapped: nn.Module, module: Any) -> bool:
    """Whether a manually optimized module runs in torch's own DDP wrapper."""
    is_ddp = type(wrapped) is nn.parallel.DistributedDataParallel
    return is_ddp and not module.automatic_optimization


def unsynced_step(wrapped: nn.Module, *args: Any) -> Any:
    """The training step through DDP (buffers broadcast) with its gradient reducer off."""
    with wrapped.no_sync():
        return wrapped(*args)


def average_gradients(params: list[torch.Tensor]) -> None:
    """All-reduce every gradient in one flat buffer and divide by the world size."""
    grads = [p.grad for p in params if p.grad is not None]
    if not grads:
        return
    flat = torch.cat([grad.reshape(-1) for grad in grads])
    dist.all_reduce(flat)
    flat /= dist.get_world_size()
    for grad, synced in zip(grads, flat.split([grad.numel() for grad in grads])):
        grad.copy_(synced.view_as(grad))


class StepForwarder(nn.Module):
    """Routes DDP's forward to ``training_step`` so DDP sees the step and syncs gradients."""

    def __init__(self, module: nn.Module) -> None:
        super().__init__()
        self.module = module

    def forward(self, *args: Any, step: str = "training_step") -> Any:
        return getattr(self.module, step)(*args)


@dataclasses.dataclass(frozen=True)
class DDPOptions:
    """DDPStrategy's own settings, as given to its constructor."""

    find_unused_parameters: bool = False
    static_graph: bool = False
    gradient_as_bucket_view: bool = False
    process_group_backend: str | None = None
    timeout: float | None = None


class DDPStrategy(ParallelStrategy):
    """Data parallel across processes: each rank holds a full replica and a data shard."""

    name = "ddp"
    launches_processes = True
    is_distributed = True

    def __init__(
        self,
        find_unused_parameters: bool = False,
        static_graph: bool = False,
        gradient_as_bucket_view: bool = False,
        process_group_backend: str | None = None,
        timeout: float | None = None,
    ) -> None:
        """
        Args:
            find_unused_parameters: Let DDP skip parameters a step did not use (slower).
            static_graph: Tell DDP the graph is the same every step (faster, fewer checks).
            gradient_as_bucket_view: Gradients as views into DDP's buckets (saves memory).
            process_group_backend: Override the backend (gloo on CPU, nccl on GPU).
            timeout: Seconds a collective waits for a late rank before the job fails (default
                $TRAINKIT_COLLECTIVE_TIMEOUT, else torch's 30 minutes).
        """
        super().__init__()
        self.options = DDPOptions(
            find_unused_parameters,
            static_graph,
            gradient_as_bucket_view,
            process_group_backend,
            timeout,
        )

    def connect(self, placement: Placement) -> None:
        super().connect(placement)
        resolve_backend(
            placement.selection.accelerator, self.options.process_group_backend
        )  # fail before ranks
        collective_timeout(self.options.timeout)

    @property
    def world_size(self) -> int:
        if self.cluster.external:
            return self.cluster.world_size
        return self.selection.count * self.num_nodes

    @property
    def global_rank(self) -> int:
        return self.cluster.global_rank

    @property
    def local_rank(self) -> int:
        return self.cluster.local_rank

    @property
    def node_rank(self) -> int:
        return self.cluster.node_rank

    @property
    def backend(self) -> str:
        return resolve_backend(self.selection.accelerator, self.options.process_group_backend)

    def setup_environment(self) -> None:
        super().setup_environment()
        if dist.is_initialized():
            return
        self.init_process_group()
        atexit.register(_destroy_process_group)  # gloo threads left running abort the interpreter

    def init_process_group(self) -> None:
        """Join the process group (override for a custom rendezvous)."""
        os.environ.setdefault("MASTER_ADDR", self.cluster.main_address)
        os.environ.setdefault("MASTER_PORT", str(self.cluster.main_port))
        seconds = collective_timeout(self.options.timeout)
        with rendezvous_store(self.cluster, seconds) as store:  # SLURM/MPI: per job step
            dist.init_process_group(
                self.backend,
                store=store,
                rank=self.global_rank,
                world_size=self.world_size,
                timeout=timedelta(seconds=seconds) if seconds is not None else None,
            )

    def setup_module(self, module: nn.Module) -> nn.Module:
        has_batchnorm = any(isinstance(m, BATCHNORMS) for m in module.modules())
        if has_batchnorm and self.sync_batchnorm:
            module = nn.SyncBatchNorm.convert_sync_batchnorm(module)
        elif has_batchnorm and self.is_global_zero:
            warnings.warn(
                "BatchNorm under ddp normalises with per-rank statistics only; set trainer.sync_batchnorm: "
                "true to use statistics of the whole effective batch",
                stacklevel=2,
            )
        module = module.to(self.root_device)
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

    def training_step_fn(self, wrapped: nn.Module, module: Any) -> Callable[[Any, int], Any]:
        if manual_under_ddp(wrapped, module):
            return functools.partial(unsynced_step, wrapped)
        return wrapped

    def manual_gradient_sync_fn(
        self, wrapped: nn.Module, module: Any
    ) -> Callable[[list[torch.Tensor]], None] | None:
        """Manual optimization under DDP: every ``manual_backward`` averages the gradients
        itself (DDP's reducer expects one backward per forward; a GAN step has two)."""
        return average_gradients if manual_under_ddp(wrapped, module) else None

    def no_backward_sync(self, wrapped: nn.Module) -> contextlib.AbstractContextManager:
        return wrapped.no_sync()

    def unwrap(self, wrapped: nn.Module) -> nn.Module:
        return wrapped.module.module

    def distributed_sampler_kwargs(self) -> dict[str, int] | None:
        return {"num_replicas": self.world_size, "rank": self.global_rank}

    def teardown(self) -> None:
        _destroy_process_group()

    def reduce(self, tensor: torch.Tensor, op: str = "mean") -> torch.Tensor:
        return all_reduce(tensor, op)

    def all_gather(self, tensor: torch.Tensor) -> torch.Tensor:
        gathered = [torch.zeros_like(tensor) for _ in range(self.world_size)]
        dist.all_gather(gathered, tensor.contiguous())
        return torch.stack(gathered)

    def all_gather_object(self, obj: Any) -> list[Any]:
        gathered: list[Any] = [None] * self.world_size
        dist.all_gather_object(gathered, obj)
        return gathered

    def broadcast(self, obj: Any, src: int = 0) -> Any:
        holder = [obj]
        dist.broadcast_object_list(holder, src=src)
        return holder[0]

    def barrier(self) -> None:
        if dist.is_initialized():
            dist.barrier()
