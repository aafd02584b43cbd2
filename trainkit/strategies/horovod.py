"""``strategy: horovod``: the ranks that horovodrun or mpirun started, their gradients averaged
by horovod's allreduce (``hvd.DistributedOptimizer``) where horovod is installed, else by
trainkit's ddp over the same ranks, to the same weights (docs/clusters.md, "Horovod")."""

from __future__ import annotations

import contextlib
import importlib
import socket
import sys
import warnings
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Protocol, cast

import torch
from torch import nn

from trainkit.distributed.error_file import at_clean_exit
from trainkit.errors import ConfigError
from trainkit.strategies.base import Placement
from trainkit.strategies.ddp import DDPStrategy

if TYPE_CHECKING:
    from trainkit.distributed.environments import ClusterEnvironment
    from trainkit.module import TrainModule
    from trainkit.optim import SchedulerConfig

HOLD = 2**30  # backward passes horovod's hooks count without reducing, while trainkit accumulates


class HorovodOptimizer(Protocol):
    """What trainkit calls on ``hvd.DistributedOptimizer`` besides the optimizer's own API."""

    def synchronize(self) -> None: ...
    def skip_synchronize(self) -> contextlib.AbstractContextManager: ...
    def set_backward_passes_per_step(self, passes: int) -> None: ...


class HorovodTorch(Protocol):
    """The part of ``horovod.torch`` this strategy uses."""

    def init(self) -> None: ...
    def cuda_built(self) -> bool: ...
    def nccl_built(self) -> bool: ...
    def is_initialized(self) -> bool: ...
    def shutdown(self) -> None: ...
    def size(self) -> int: ...
    def rank(self) -> int: ...
    def broadcast_parameters(self, params: dict[str, torch.Tensor], root_rank: int) -> None: ...
    def broadcast_optimizer_state(
        self, optimizer: torch.optim.Optimizer, root_rank: int
    ) -> None: ...
    def DistributedOptimizer(  # horovod's name
        self, optimizer: torch.optim.Optimizer, named_parameters: list[tuple[str, nn.Parameter]]
    ) -> torch.optim.Optimizer: ...


def horovod() -> HorovodTorch:
    """``horovod.torch`` (imported where it is used: it is optional)."""
    return cast(HorovodTorch, importlib.import_module("horovod.torch"))


def horovod_missing(on_gpu: bool = False) -> str:
    """Why ``horovod.torch`` cannot average this run's gradients ("" when it can): not
    installed, built against another torch (its library then fails to load), or, for GPU ranks,
    built without CUDA (scripts/install_horovod.sh builds for CPU)."""
    try:
        hvd = horovod()
    except (ImportError, OSError) as error:
        return str(error).splitlines()[0] if str(error) else type(error).__name__
    if on_gpu and not (hvd.cuda_built() or hvd.nccl_built()):
        return "it was built without GPU support (HOROVOD_GPU_OPERATIONS=NCCL builds it)"
    return ""


def quiet_replaced_step_warning() -> None:
    """A scheduler now follows horovod's optimizer, which torch's scheduler did not see built:
    its first step would warn that ``optimizer.step()`` "has been overridden" (it was replaced,
    and it does step before the scheduler)."""
    warnings.filterwarnings(
        "ignore",
        message=r"Seems like `optimizer.step\(\)` has been overridden",
        category=UserWarning,
    )


def check_launched(placement: Placement) -> None:
    """Several ranks of strategy horovod come from horovodrun or mpirun, which give horovod its
    world (their environments say ``joins_horovod``); trainkit starts none for it (one process
    needs no launcher)."""
    cluster = placement.cluster
    if cluster.joins_horovod:
        return
    asked = placement.selection.count * placement.num_nodes
    if not cluster.creates_processes_externally and asked == 1:
        return
    per_node = placement.selection.count
    launch = (
        f"horovodrun -np {asked} trainkit fit ... (or mpirun -np {asked}"
        + (f" --npernode {per_node}" if placement.num_nodes > 1 else "")
        + " trainkit fit ...)"
    )
    if cluster.creates_processes_externally:
        raise ConfigError(
            "trainer.strategy",
            "horovod",
            f"ranks started by horovodrun or mpirun, not by {cluster.name}",
            f"start them with {launch}, or use strategy ddp under {cluster.name}",
        )
    raise ConfigError(
        "trainer.strategy",
        "horovod",
        f"its {asked} ranks (trainer.devices x trainer.num_nodes) started by horovodrun or "
        "mpirun: trainkit starts no ranks for horovod",
        f"run {launch}, or use strategy ddp and trainkit starts them",
    )


def launcher_command(cluster: ClusterEnvironment) -> str:
    """The command that started the ranks, for messages."""
    words = cluster.launcher_words
    return words.command if words is not None else "the launcher"


def check_serves_here(address: str) -> None:
    """Rank 0 under horovodrun on several hosts serves trainkit's rendezvous at ``address``
    (horovodrun's own host unless MASTER_ADDR says): it must be this host, or the other ranks
    would wait for a rank 0 that is not there."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((address, 0))
        except OSError:
            raise ConfigError(
                "MASTER_ADDR",
                address,
                f"an address of rank 0's host ({socket.gethostname()}), where the other ranks "
                "find trainkit's rendezvous",
                "start horovodrun on the first host of -H, or pass MASTER_ADDR=<rank 0's host> "
                "to horovodrun",
            ) from None


class HorovodStrategy(DDPStrategy):
    """Data parallel over the ranks horovodrun or mpirun started, one replica per rank: with
    horovod installed, ``hvd.DistributedOptimizer`` averages the gradients (its allreduce,
    started per parameter during the backward) after rank 0's weights were broadcast; without
    it, DistributedDataParallel does, as ``ddp``. Either way trainkit's own gloo group carries
    its collectives (metrics, checkpoints, stop decisions)."""

    name = "horovod"

    def __init__(self, process_group_backend: str | None = None, timeout: float | None = None):
        """
        Args:
            process_group_backend: Override the backend of trainkit's own process group (gloo
                on CPU, nccl on GPU).
            timeout: Seconds a collective waits for a late rank before the job fails (default
                $TRAINKIT_COLLECTIVE_TIMEOUT, else torch's 30 minutes).
        """
        super().__init__(process_group_backend=process_group_backend, timeout=timeout)
        self.uses_horovod = False  # decided by connect: horovod is importable
        self._optimizers: list[HorovodOptimizer] = []  # horovod's, once setup_optimizers ran
        self._skips = contextlib.ExitStack()  # the optimizers' skip_synchronize, for the fit

    def connect(self, placement: Placement) -> None:
        check_launched(placement)
        super().connect(placement)
        missing = horovod_missing(on_gpu=placement.selection.accelerator == "gpu")
        self.uses_horovod = not missing
        cluster = placement.cluster
        if missing and cluster.world_size > 1 and cluster.global_rank == 0:
            print(
                f"trainkit: strategy horovod: horovod is not usable ({missing}); trainkit's "
                f"ddp averages the gradients of the {cluster.world_size} ranks "
                f"{launcher_command(cluster)} started instead, to the same "
                "weights (docs/clusters.md, 'Horovod')",
                file=sys.stderr,
                flush=True,
            )

    def describe(self) -> str:
        if self.uses_horovod:
            return "horovod (horovod's allreduce)"
        return "horovod (trainkit's ddp: horovod is not usable)"

    def init_process_group(self) -> None:
        """trainkit's own group; where the rendezvous address is the launcher's host (horovodrun
        on several hosts), rank 0 first checks that it is its own."""
        cluster = self.cluster
        if cluster.main_address_guessed and cluster.num_nodes > 1 and self.is_global_zero:
            check_serves_here(cluster.main_address)
        super().init_process_group()

    def setup_environment(self) -> None:
        super().setup_environment()
        if not self.uses_horovod:
            return
        hvd = horovod()
        hvd.init()
        at_clean_exit(hvd.shutdown)  # MPI_Finalize under mpirun (else: "exited improperly")
        if (hvd.size(), hvd.rank()) != (self.world_size, self.global_rank):
            raise RuntimeError(
                f"horovod sees rank {hvd.rank()} of {hvd.size()} where "
                f"{self.cluster.name} started rank {self.global_rank} of {self.world_size}: "
                "start the job with horovodrun or mpirun alone"
            )

    def configure_ddp(self, forwarder: nn.Module) -> nn.Module:
        """With horovod: no wrapper; every rank starts from rank 0's weights and buffers."""
        if not self.uses_horovod:
            return super().configure_ddp(forwarder)
        horovod().broadcast_parameters(forwarder.state_dict(), root_rank=0)
        return forwarder

    def setup_optimizers(
        self,
        wrapped: nn.Module,
        optimizers: list[torch.optim.Optimizer],
        schedulers: list[SchedulerConfig],
    ):
        """With horovod: each optimizer as ``hvd.DistributedOptimizer`` (its schedulers follow),
        whose ``step`` never synchronizes on its own: trainkit synchronizes before the optimizer
        step's unscale, clipping and hooks (``gradient_sync_fn``), as horovod's docs advise.

        Optimizer state is broadcast from rank 0 only when there is some: horovod fills an
        empty state by stepping on zero gradients, which would move weights under weight decay
        and count an Adam step; here every rank's state is empty, or restored later from the
        same checkpoint."""
        if not self.uses_horovod:
            return super().setup_optimizers(wrapped, optimizers, schedulers)
        hvd = horovod()
        self._skips.close()
        self._skips = contextlib.ExitStack()
        names = {id(param): name for name, param in wrapped.named_parameters()}
        distributed: list[torch.optim.Optimizer] = []
        self._optimizers = []
        for index, optimizer in enumerate(optimizers):
            if optimizer.state:
                hvd.broadcast_optimizer_state(optimizer, root_rank=0)
            params = [p for group in optimizer.param_groups for p in group["params"]]
            named = [
                (names.get(id(p), f"optimizer{index}.param{k}"), p) for k, p in enumerate(params)
            ]
            wrapper = hvd.DistributedOptimizer(optimizer, named_parameters=named)
            synced = cast(HorovodOptimizer, wrapper)
            self._skips.enter_context(synced.skip_synchronize())
            for config in schedulers:
                if config.scheduler.optimizer is optimizer:
                    config.scheduler.optimizer = wrapper
                    quiet_replaced_step_warning()
            distributed.append(wrapper)
            self._optimizers.append(synced)
        return wrapped, distributed

    def load_optimizer_state_dict(
        self, optimizer: torch.optim.Optimizer, state: dict[str, Any]
    ) -> None:
        super().load_optimizer_state_dict(optimizer, state)
        for mine in self._optimizers:
            if mine is optimizer:  # horovod's load_state_dict lets step synchronize again
                self._skips.enter_context(mine.skip_synchronize())

    def synchronize(self, params: list[torch.Tensor] | None = None) -> None:
        """Wait for horovod's allreduce of every gradient: they are the ranks' average now."""
        for optimizer in self._optimizers:
            optimizer.synchronize()

    def gradient_sync_fn(self) -> Callable[[list[torch.Tensor]], None] | None:
        return self.synchronize if self.uses_horovod else super().gradient_sync_fn()

    def manual_gradient_sync_fn(
        self, wrapped: nn.Module, module: TrainModule
    ) -> Callable[[list[torch.Tensor]], None] | None:
        """With horovod under manual optimization: every ``manual_backward`` ends averaged."""
        if not self.uses_horovod:
            return super().manual_gradient_sync_fn(wrapped, module)
        return None if module.automatic_optimization else self.synchronize

    def no_backward_sync(self, wrapped: nn.Module) -> contextlib.AbstractContextManager:
        return self._hold() if self.uses_horovod else super().no_backward_sync(wrapped)

    @contextlib.contextmanager
    def _hold(self) -> Iterator[None]:
        """While trainkit accumulates: horovod's hooks count the backward passes and reduce
        nothing; the window's last backward (outside) reduces the accumulated gradients."""
        for optimizer in self._optimizers:
            optimizer.set_backward_passes_per_step(HOLD)
        try:
            yield
        finally:
            for optimizer in self._optimizers:
                optimizer.set_backward_passes_per_step(1)
