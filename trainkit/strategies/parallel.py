"""ParallelStrategy: the ranks of a job, the process group joining them, their collectives, and
the launcher that starts them. Every strategy over several processes derives from it; each adds
only how it places and wraps the model."""

from __future__ import annotations

import atexit
import os
import warnings
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist

from trainkit.common.warnings import PossibleUserWarning
from trainkit.distributed.comm import all_reduce
from trainkit.distributed.network import use_routable_interface
from trainkit.distributed.rendezvous import rendezvous_store
from trainkit.errors import ConfigError
from trainkit.strategies.base import Placement, Strategy

BACKEND_ENV = "TRAINKIT_DISTRIBUTED_BACKEND"
BATCHNORMS = (torch.nn.BatchNorm1d, torch.nn.BatchNorm2d, torch.nn.BatchNorm3d)
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


def destroy_process_group() -> None:
    """Leave the process group, if this process joined one."""
    if dist.is_initialized():
        dist.destroy_process_group()


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


class ParallelStrategy(Strategy):
    """Several processes (or, for ``dp``, several devices in one): this class owns the ranks
    (from the launching environment), the process group when ``is_distributed``, the
    collectives over it, the distributed sampler's arguments, and the launcher of the ranks.

    ``process_per_device`` says whether each device gets its own rank (the ddp family) or one
    process drives the devices of its node (``ddp2``, ``dp``)."""

    process_per_device = True
    is_distributed = True

    def __init__(self, process_group_backend: str | None = None, timeout: float | None = None):
        """
        Args:
            process_group_backend: Override the backend (gloo on CPU, nccl on GPU).
            timeout: Seconds a collective waits for a late rank before the job fails (default
                $TRAINKIT_COLLECTIVE_TIMEOUT, else torch's 30 minutes).
        """
        super().__init__()
        self.process_group_backend = process_group_backend
        self.timeout = timeout

    def connect(self, placement: Placement) -> None:
        super().connect(placement)
        if self.is_distributed:  # a bad backend or timeout fails before any rank starts
            resolve_backend(placement.selection.accelerator, self.process_group_backend)
            collective_timeout(self.timeout)

    def check_module(self, module: torch.nn.Module) -> None:
        """``sync_batchnorm`` over several CPU ranks is refused before they start: torch's
        SyncBatchNorm runs on CUDA only (DDP would fail in every rank, with a traceback)."""
        super().check_module(module)
        synced_on_cpu = self.sync_batchnorm and self.root_device.type == "cpu"
        if not (synced_on_cpu and self.is_distributed and self.world_size > 1):
            return
        layer = next((m for m in module.modules() if isinstance(m, BATCHNORMS)), None)
        if layer is not None:
            raise ConfigError(
                "trainer.sync_batchnorm",
                True,
                f"false on CPU ({type(layer).__name__} found; torch's SyncBatchNorm runs on CUDA only)",
                "set sync_batchnorm: false (each rank normalises over its own batch) or train on GPUs",
            )

    def with_batchnorm_synced(self, module: torch.nn.Module) -> torch.nn.Module:
        """``module`` with its BatchNorm layers as SyncBatchNorm when ``trainer.sync_batchnorm``
        is set; otherwise it warns (rank 0, once) that each rank normalises over its own batch."""
        if not any(isinstance(layer, BATCHNORMS) for layer in module.modules()):
            return module
        if self.sync_batchnorm and self.world_size > 1:  # over one rank: BatchNorm as it is
            return torch.nn.SyncBatchNorm.convert_sync_batchnorm(module)
        if self.is_global_zero and self.world_size > 1:
            warnings.warn(
                f"BatchNorm under {self.name} normalises with per-rank statistics only; set "
                "trainer.sync_batchnorm: true to use statistics of the whole effective batch",
                PossibleUserWarning,
                stacklevel=2,
            )
        return module

    # ---- ranks ----------------------------------------------------------------------------------
    @property
    def processes_per_node(self) -> int:
        return self.selection.count if self.process_per_device else 1

    @property
    def world_size(self) -> int:
        if self.cluster.creates_processes_externally:
            return self.cluster.world_size
        return self.processes_per_node * self.num_nodes

    @property
    def global_rank(self) -> int:
        return self.cluster.global_rank

    @property
    def local_rank(self) -> int:
        return self.cluster.local_rank

    @property
    def node_rank(self) -> int:
        return self.cluster.node_rank

    # ---- the process group ----------------------------------------------------------------------
    @property
    def backend(self) -> str:
        return resolve_backend(self.selection.accelerator, self.process_group_backend)

    def setup_environment(self) -> None:
        super().setup_environment()
        if not self.is_distributed or dist.is_initialized():
            return
        self.init_process_group()
        atexit.register(destroy_process_group)  # gloo threads left running abort the interpreter

    def init_process_group(self) -> None:
        """Join the process group (override for a custom rendezvous)."""
        os.environ.setdefault("MASTER_ADDR", self.cluster.main_address)
        os.environ.setdefault("MASTER_PORT", str(self.cluster.main_port))
        if self.cluster.num_nodes > 1:  # gloo must not tell the other machines a loopback address
            use_routable_interface(self.cluster.main_address, os.environ)
        seconds = collective_timeout(self.timeout)
        with rendezvous_store(self.cluster, seconds) as store:  # SLURM/MPI: per job step
            dist.init_process_group(
                self.backend,
                store=store,
                rank=self.global_rank,
                world_size=self.world_size,
                timeout=timedelta(seconds=seconds) if seconds is not None else None,
            )

    def teardown(self) -> None:
        if self.is_distributed:
            destroy_process_group()

    def distributed_sampler_kwargs(self) -> dict[str, int] | None:
        if not self.is_distributed:
            return None
        return {"num_replicas": self.world_size, "rank": self.global_rank}

    # ---- collectives (one process without a group: as Strategy) ---------------------------------
    def reduce(self, tensor: torch.Tensor, op: str = "mean") -> torch.Tensor:
        return all_reduce(tensor, op) if self.is_distributed else tensor

    def all_gather(self, tensor: torch.Tensor) -> torch.Tensor:
        if not self.is_distributed:
            return super().all_gather(tensor)
        gathered = [torch.zeros_like(tensor) for _ in range(self.world_size)]
        dist.all_gather(gathered, tensor.contiguous())
        return torch.stack(gathered)

    def all_gather_object(self, obj: object) -> list[Any]:
        if not self.is_distributed:
            return super().all_gather_object(obj)
        gathered: list[Any] = [None] * self.world_size
        dist.all_gather_object(gathered, obj)
        return gathered

    def broadcast(self, obj: object, src: int = 0) -> Any:
        if not self.is_distributed:
            return obj
        holder = [obj]
        dist.broadcast_object_list(holder, src=src)
        return holder[0]

    def barrier(self) -> None:
        if dist.is_initialized():
            dist.barrier()
