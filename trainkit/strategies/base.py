"""Strategy: how a module is placed on devices, wrapped, and synchronised across ranks."""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from trainkit.data import move_to_device
from trainkit.devices import DeviceSelection
from trainkit.distributed.environments import ClusterEnvironment, LoneEnvironment, NodePlacement
from trainkit.distributed.launchers import Launcher
from trainkit.distributed.launchers.choice import REEXEC_METHOD, choose_launcher
from trainkit.distributed.world_check import check_launched_world
from trainkit.scaling import BatchLoading

if TYPE_CHECKING:
    from trainkit.checkpoint.checkpoint_io import CheckpointIO
    from trainkit.module import TrainModule
    from trainkit.optim import SchedulerConfig


ONE_CPU = DeviceSelection("cpu", (0,))
NO_CLUSTER = LoneEnvironment()


@dataclasses.dataclass(frozen=True)
class Placement:
    """What the Trainer resolved and a strategy is built with: devices, nodes, the launching
    environment, numeric precision, whether BatchNorm is synchronised, and the gradient clipping
    (for a strategy whose engine clips: DeepSpeed)."""

    selection: DeviceSelection = ONE_CPU
    num_nodes: int = 1
    cluster: ClusterEnvironment = NO_CLUSTER
    precision: str = "32"
    sync_batchnorm: bool = False
    gradient_clip_val: float | None = None
    gradient_clip_algorithm: str | None = None  # None: 'norm'


class Strategy:
    """One process, one device. Subclasses add process groups and model wrappers.

    A strategy's own settings come from its constructor; ``connect`` hands it the Trainer's
    resolved ``Placement`` once, when the Trainer selects it (or, in a spawned rank, a copy).
    What a strategy can and cannot do is said by the capability attributes below, never by its
    ``name`` (which is for people: the startup table and messages).
    """

    name = "single"
    # capabilities: read these, not the name
    process_per_device: bool = False  # one rank per device (else one process drives a node)
    is_distributed: bool = False  # ranks joined by a process group
    batch_loading: BatchLoading = BatchLoading.PER_DEVICE  # who loads distinct batches
    shards_state: bool = False  # each rank holds only a part of the weights or optimizer state
    supports_param_group_changes: bool = True  # callbacks may add optimizer param groups
    zero_grad_set_to_none: bool = True  # False: zero the grads in place (fairscale, deepspeed)
    scales_fp16_loss: bool = False  # its engine scales the fp16 loss itself (no GradScaler)
    start_method: str = REEXEC_METHOD  # how its ranks start: re-run the command, or spawn/fork

    def __init__(self) -> None:
        self.placement = Placement()

    def connect(self, placement: Placement) -> None:
        """Receive what the Trainer resolved (devices, nodes, environment, precision) and check
        that this strategy can run it; called once, before any rank starts. Under an external
        launcher, the world it started must be the one asked for (one line, else)."""
        self.placement = placement
        check_launched_world(self)

    def in_rank(self, cluster: ClusterEnvironment) -> Strategy:
        """A copy of this strategy for a rank this process started (``cluster`` names it)."""
        clone = copy.copy(self)
        clone.connect(dataclasses.replace(self.placement, cluster=cluster))
        return clone

    @property
    def selection(self) -> DeviceSelection:
        return self.placement.selection

    @property
    def num_nodes(self) -> int:
        return self.placement.num_nodes

    @property
    def cluster(self) -> ClusterEnvironment:
        return self.placement.cluster

    @property
    def precision(self) -> str:
        """The run's precision; strategies with their own mixed precision (FSDP, DeepSpeed) read it."""
        return self.placement.precision

    @property
    def sync_batchnorm(self) -> bool:
        return self.placement.sync_batchnorm

    # ---- ranks ----------------------------------------------------------------------------------
    @property
    def world_size(self) -> int:
        return 1

    @property
    def global_rank(self) -> int:
        return 0

    @property
    def local_rank(self) -> int:
        return 0

    @property
    def node_rank(self) -> int:
        return 0

    @property
    def is_global_zero(self) -> bool:
        return self.global_rank == 0

    @property
    def root_device(self) -> torch.device:
        if self.selection.accelerator == "gpu":
            return torch.device("cuda", self.selection.ids[self.local_rank])
        return torch.device("cpu")

    # ---- lifecycle ----------------------------------------------------------------------------
    def setup_environment(self) -> None:
        """Prepare this process (set the CUDA device, join the process group)."""
        if self.root_device.type == "cuda":
            torch.cuda.set_device(self.root_device)

    def check_module(self, module: nn.Module) -> None:
        """Reject a module this strategy cannot run, before any rank starts (default: accept)."""

    def setup_module(self, module: nn.Module) -> nn.Module:
        """Move ``module`` to the root device and return what the training step runs through."""
        return module.to(self.root_device)

    def grad_scaler(self) -> torch.amp.GradScaler | None:
        """The fp16 gradient scaler this strategy needs (None: torch's GradScaler)."""
        return None

    def setup_optimizers(
        self,
        wrapped: nn.Module,
        optimizers: list[torch.optim.Optimizer],
        schedulers: list[SchedulerConfig],
    ):
        """Adjust optimizers (and the module wrapper) once they exist; default: unchanged."""
        return wrapped, optimizers

    def training_step_fn(
        self, wrapped: nn.Module, module: TrainModule
    ) -> Callable[[Any, int], Any]:
        """The callable the fit loop calls per batch: ``(batch, batch_idx) -> output``."""
        return module.training_step

    def step_fn(self, module: TrainModule, name: str) -> Callable[..., Any]:
        """The callable for an evaluation/predict step named ``name``."""
        return getattr(module, name)

    @property
    def processes_per_node(self) -> int:
        """How many processes (ranks) run on each node."""
        return 1

    def launcher(self, max_restarts: int = 0) -> Launcher | None:
        """What starts this run's ranks; None when this process is the only rank or an external
        launcher started them. With ``max_restarts`` the re-executing launcher watches the ranks
        and starts them again on failure (from a script or the trainkit command; an interactive
        session cannot be re-run). Chosen in one place: ``launchers/choice.py``."""
        return choose_launcher(self, max_restarts)

    def forked_twin(self) -> Strategy:
        """The strategy that ranks forked from an interactive session run (default: this one)."""
        return self

    def node_placement(self) -> NodePlacement:
        """This node's place in the job (NODE_RANK, MASTER_ADDR, MASTER_PORT, or the scheduler's
        step), each checked: a bad one fails here in one line, before any rank starts."""
        return self.cluster.node_placement(os.environ, self.num_nodes)

    @property
    def num_processes(self) -> int:
        """Processes on each node (Lightning's name for ``processes_per_node``)."""
        return self.processes_per_node

    @property
    def cluster_environment(self) -> ClusterEnvironment:
        """Where the ranks came from: trainkit's launcher, torchrun, SLURM or MPI."""
        return self.cluster

    def module_init_context(self, empty_init: bool | None = None) -> Any:
        """Where layers built in ``configure_model`` (or under ``Trainer.init_module``) are
        created: on this rank's device."""
        return torch.device(self.root_device)

    def manual_gradient_sync_fn(
        self, wrapped: nn.Module, module: TrainModule
    ) -> Callable[[list[torch.Tensor]], None] | None:
        """What syncs gradients after each ``manual_backward`` (None: the wrapper does)."""
        return None

    def backward_fn(self) -> Callable[..., None] | None:
        """Runs ``loss.backward`` itself (an engine that scales/partitions), or None for the default."""
        return None

    def optimizer_step_fn(self) -> Callable[[], Any] | None:
        """Steps and zeroes the optimizer itself (an engine), or None for the default."""
        return None

    def gradient_sync_fn(self) -> Callable[[list[torch.Tensor]], None] | None:
        """Called with the parameters before each optimizer step (None: nothing to do)."""
        return None

    def default_step_end(self) -> Callable[[Any], Any] | None:
        """What reduces a step's output when the module defines no ``*_step_end`` (None: nothing)."""
        return None

    def batch_transfer_fn(self) -> Callable[[Any], Any] | None:
        """How a batch reaches the device; None when it is already there (CPU)."""
        device = self.root_device
        if device.type == "cpu":
            return None
        return lambda batch: move_to_device(batch, device)

    def no_backward_sync(self, wrapped: nn.Module) -> contextlib.AbstractContextManager:
        """A context that skips gradient sync (for accumulation steps)."""
        return contextlib.nullcontext()

    def distributed_sampler_kwargs(self) -> dict[str, int] | None:
        """``num_replicas``/``rank`` for DistributedSampler, or None when not distributed."""
        return None

    def describe(self) -> str:
        """The strategy as the startup table shows it (name, and what it does if not obvious)."""
        return self.name

    def teardown(self) -> None: ...

    # ---- collectives (identity for one process) -------------------------------------------------
    def reduce(self, tensor: torch.Tensor, op: str = "mean") -> torch.Tensor:
        return tensor

    def all_gather(self, tensor: torch.Tensor) -> torch.Tensor:
        """``tensor`` from every rank, stacked on a new first dimension (one process: as is,
        as in Lightning)."""
        return tensor

    def all_gather_object(self, obj: object) -> list[Any]:
        return [obj]

    def broadcast(self, obj: object, src: int = 0) -> Any:
        return obj

    def barrier(self) -> None: ...

    # ---- checkpoints ------------------------------------------------------------------------------
    def module_state_dict(self, module: nn.Module) -> dict[str, Any]:
        return module.state_dict()

    def optimizer_state_dict(self, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
        return optimizer.state_dict()

    def save_checkpoint_file(
        self,
        checkpoint: dict[str, Any],
        path: str,
        io: CheckpointIO | None = None,
        storage_options: object = None,
    ) -> None:
        """Write the checkpoint (called on every rank) through ``io`` (a CheckpointIO; default:
        an atomic torch.save) with its ``storage_options``: ``write_checkpoint``."""
        from trainkit.checkpoint.checkpoint_io import TorchCheckpointIO

        io = io if io is not None else TorchCheckpointIO()
        self.write_checkpoint(checkpoint, path, io, storage_options)

    def write_checkpoint(
        self, checkpoint: dict[str, Any], path: str, io: CheckpointIO, storage_options: object
    ) -> None:
        """One file, from global rank 0 (strategies with sharded checkpoints write a folder)."""
        if self.is_global_zero:
            io.save_checkpoint(checkpoint, path, storage_options)

    def load_checkpoint_file(
        self,
        path: str,
        io: CheckpointIO,
        weights_only: bool,
        optimizers: list[torch.optim.Optimizer],
    ) -> dict[str, Any]:
        """Read the checkpoint a run restores (called on every rank) through ``io``; strategies
        with sharded checkpoints read only this rank's shards into ``optimizers`` and the model."""
        return io.load_checkpoint(path, map_location="cpu", weights_only=weights_only)

    def load_module_state_dict(self, module: nn.Module, state: dict[str, Any]) -> None:
        module.load_state_dict(state)

    def load_optimizer_state_dict(
        self, optimizer: torch.optim.Optimizer, state: dict[str, Any]
    ) -> None:
        optimizer.load_state_dict(state)
