"""FSDPStrategy: fully sharded data parallel with FSDP2 (``fully_shard``): parameters, gradients
and optimizer state are split over the ranks and gathered layer by layer when needed."""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from trainkit.errors import ConfigError
from trainkit.strategies.parallel import ParallelStrategy
from trainkit.strategies.shard_units import (
    call_explaining_units,
    default_min_num_params,
    describe_units,
    shard_units,
    unit_classes,
)
from trainkit.strategies.step_forwarder import StepForwarder

if TYPE_CHECKING:
    from torch.distributed.fsdp import FSDPModule

    from trainkit.checkpoint.checkpoint_io import CheckpointIO
    from trainkit.module import TrainModule

SHARDING = {"FULL_SHARD": True, "SHARD_GRAD_OP": False}


class FSDPStrategy(ParallelStrategy):
    """``fsdp``: each rank holds 1/N of every sharded module's parameters and optimizer state."""

    name = "fsdp"
    shards_state = True

    def __init__(
        self,
        sharding_strategy: str = "FULL_SHARD",
        auto_wrap_policy: list[str | type[nn.Module]] | set[type[nn.Module]] | None = None,
        min_num_params: int | None = None,
        activation_checkpointing: list[str] | None = None,
        cpu_offload: bool = False,
        mixed_precision: bool = True,
        state_dict_type: str = "full",
        process_group_backend: str | None = None,
        timeout: float | None = None,
    ) -> None:
        """
        Args:
            sharding_strategy: 'FULL_SHARD' (reshard parameters after forward) or 'SHARD_GRAD_OP'
                (keep them gathered until backward: more memory, less communication).
            auto_wrap_policy: Modules sharded as their own unit: class names, e.g. [Linear, Block],
                or classes (and their subclasses), e.g. {nn.Linear}.
            min_num_params: Also shard as a unit any module with at least this many parameters not
                in a smaller unit (default: 1,000,000 without auto_wrap_policy, else 0; 0 with no
                class names: the whole model is one unit, gathered whole each step).
            activation_checkpointing: Module class names whose activations are recomputed in backward.
            cpu_offload: Keep sharded parameters, gradients and optimizer state in CPU memory.
            mixed_precision: Under bf16-mixed/16-mixed, compute in that dtype (reduce in float32).
            state_dict_type: Checkpoints as one 'full' file written by rank 0, or 'sharded': a folder
                where every rank writes its own shards (torch.distributed.checkpoint).
            process_group_backend: Override the backend (gloo on CPU, nccl on GPU).
            timeout: Seconds a collective waits for a late rank (default $TRAINKIT_COLLECTIVE_TIMEOUT, else torch's).
        """
        super().__init__(process_group_backend=process_group_backend, timeout=timeout)
        if sharding_strategy not in SHARDING:
            raise ConfigError(
                "fsdp sharding_strategy", sharding_strategy, "'FULL_SHARD' or 'SHARD_GRAD_OP'"
            )
        if state_dict_type not in ("full", "sharded"):
            raise ConfigError("fsdp state_dict_type", state_dict_type, "'full' or 'sharded'")
        self.state_dict_type = state_dict_type
        self.sharding_strategy = sharding_strategy
        if min_num_params is not None and min_num_params < 0:
            raise ConfigError(
                "fsdp min_num_params",
                min_num_params,
                "an int >= 0 or None (1,000,000 without auto_wrap_policy, else 0)",
                "0 makes the whole model one unit",
            )
        self.auto_wrap_policy = unit_classes(auto_wrap_policy)
        self.min_num_params = (
            default_min_num_params(self.auto_wrap_policy)
            if min_num_params is None
            else min_num_params
        )
        self.activation_checkpointing = list(activation_checkpointing or [])
        self.cpu_offload = cpu_offload
        self.mixed_precision = mixed_precision
        self._init_rng_state: torch.Tensor | None = None
        self._units = ""  # the shard units setup_module chose, named for error messages

    def _policies(self) -> dict[str, Any]:
        from torch.distributed.fsdp import CPUOffloadPolicy, MixedPrecisionPolicy

        kwargs: dict[str, Any] = {"reshard_after_forward": SHARDING[self.sharding_strategy]}
        dtype = {"bf16-mixed": torch.bfloat16, "16-mixed": torch.float16}.get(self.precision)
        if self.mixed_precision and dtype is not None:
            kwargs["mp_policy"] = MixedPrecisionPolicy(
                param_dtype=dtype, reduce_dtype=torch.float32
            )
        if self.cpu_offload:
            kwargs["offload_policy"] = CPUOffloadPolicy(pin_memory=torch.cuda.is_available())
        return kwargs

    def setup_environment(self) -> None:
        super().setup_environment()
        if self.root_device.type == "cpu":
            from trainkit.strategies.host_memory import return_freed_buffers

            return_freed_buffers()

    def module_init_context(self, empty_init: bool | None = None) -> Any:
        """On the meta device (unless ``empty_init=False``): no rank ever holds the whole
        model; ``setup_module`` materialises each rank's shard (see meta_init)."""
        if empty_init is False:
            return super().module_init_context(empty_init)
        if self._init_rng_state is None:  # the random state the layers are declared at
            self._init_rng_state = torch.get_rng_state()
        return torch.device("meta")

    def setup_module(self, module: nn.Module) -> nn.Module:
        from torch.distributed.fsdp import fully_shard

        from trainkit.strategies.meta_init import has_meta_parameters, materialize

        module = self.with_batchnorm_synced(module)
        declared_on_meta = has_meta_parameters(module)
        if not declared_on_meta:
            module = module.to(self.root_device)
        for sub in module.modules():
            if type(sub).__name__ in self.activation_checkpointing:
                sub.forward = functools.partial(checkpoint, sub.forward, use_reentrant=False)
        kwargs = self._policies()
        units = shard_units(module, self.auto_wrap_policy, self.min_num_params)
        self._units = describe_units(module, units)
        for sub in units:
            fully_shard(sub, **kwargs)  # children before parents
        forwarder = StepForwarder(module)
        fully_shard(forwarder, **kwargs)  # the root unit: every parameter not in a smaller unit
        if declared_on_meta:
            materialize(module, self.root_device, self._init_rng_state)
        self._module, self._forwarder = module, forwarder
        return forwarder

    def training_step_fn(self, wrapped: nn.Module, module: TrainModule) -> Any:
        """The training step enters through the root unit, which gathers the parameters."""
        return functools.partial(call_explaining_units, wrapped, self._units)

    def step_fn(self, module: TrainModule, name: str) -> Any:
        """Evaluation steps enter through the root unit too (FSDP gathers parameters there)."""
        forwarder = getattr(self, "_forwarder", None)
        if forwarder is None:
            return getattr(module, name)
        return functools.partial(
            call_explaining_units, functools.partial(forwarder, step=name), self._units
        )

    def no_backward_sync(self, wrapped: nn.Module) -> Any:
        import contextlib

        root = cast("FSDPModule", wrapped)  # setup_module made it the root unit (fully_shard)

        @contextlib.contextmanager
        def no_sync():
            root.set_requires_gradient_sync(False)
            try:
                yield
            finally:
                root.set_requires_gradient_sync(True)

        return no_sync()

    # ---- checkpoints: full state written by rank 0, or each rank's shards (state_dict_type) ----
    def module_state_dict(self, module: nn.Module) -> dict[str, Any]:
        from torch.distributed.checkpoint.state_dict import get_model_state_dict

        return get_model_state_dict(module, options=self._save_options())

    def optimizer_state_dict(self, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
        from torch.distributed.checkpoint.state_dict import get_optimizer_state_dict

        return get_optimizer_state_dict(self._module, optimizer, options=self._save_options())

    def _save_options(self) -> Any:
        from torch.distributed.checkpoint.state_dict import StateDictOptions

        if self.state_dict_type == "sharded":
            return StateDictOptions(full_state_dict=False)
        return StateDictOptions(full_state_dict=True, cpu_offload=True)

    def write_checkpoint(
        self, checkpoint: dict[str, Any], path: str, io: CheckpointIO, storage_options: object
    ) -> None:
        """A sharded state dict: a folder, each rank writing its shard; else one file."""
        if self.state_dict_type != "sharded" or not self._sharded:
            super().write_checkpoint(checkpoint, path, io, storage_options)
            return
        if storage_options is not None:
            raise TypeError(
                f"storage_options={storage_options!r} for a sharded checkpoint folder; expected "
                "None (each rank writes its shard locally); or FSDPStrategy(state_dict_type='full')"
            )
        io.save_sharded_checkpoint(checkpoint, path, self.is_global_zero, self.barrier)

    def load_checkpoint_file(
        self,
        path: str,
        io: CheckpointIO,
        weights_only: bool,
        optimizers: list[torch.optim.Optimizer],
    ) -> dict[str, Any]:
        """A sharded checkpoint folder, once the model is sharded: each rank reads only its own
        shards of the weights and of ``optimizers`` (never the whole model); else the file."""
        from trainkit.checkpoint.files import SHARDED_META, load_sharded_checkpoint_into

        if not (self._sharded and (Path(path) / SHARDED_META).is_file()):
            return super().load_checkpoint_file(path, io, weights_only, optimizers)
        from torch.distributed.checkpoint.state_dict import (
            get_model_state_dict,
            get_optimizer_state_dict,
        )

        io.wait()  # a save still in flight must not be read half-written
        options = self._load_options(full=False)
        shards: dict[str, Any] = {"state_dict": get_model_state_dict(self._module, options=options)}
        if optimizers:  # their states exist (initialised by torch) so the shards load into them
            shards["optimizer_states"] = [
                get_optimizer_state_dict(self._module, optimizer, options=options)
                for optimizer in optimizers
            ]
        return load_sharded_checkpoint_into(shards, path, weights_only)

    def load_module_state_dict(self, module: nn.Module, state: dict[str, Any]) -> None:
        from torch.distributed.checkpoint.state_dict import set_model_state_dict

        if not self._sharded:  # before setup_module (e.g. validate from a checkpoint): plain load
            module.load_state_dict(state)
            return
        set_model_state_dict(module, state, options=self._load_options(not holds_shards(state)))

    def load_optimizer_state_dict(
        self, optimizer: torch.optim.Optimizer, state: dict[str, Any]
    ) -> None:
        from torch.distributed.checkpoint.state_dict import set_optimizer_state_dict

        options = self._load_options(not holds_shards(state))
        set_optimizer_state_dict(self._module, optimizer, state, options=options)

    @staticmethod
    def _load_options(full: bool) -> Any:
        from torch.distributed.checkpoint.state_dict import StateDictOptions

        return StateDictOptions(full_state_dict=full)

    @property
    def _sharded(self) -> bool:
        return getattr(self, "_module", None) is not None


def holds_shards(tree: object) -> bool:
    """Whether a state dict holds sharded tensors (DTensor), as a sharded checkpoint loads."""
    from torch.distributed.tensor import DTensor

    if isinstance(tree, DTensor):
        return True
    if isinstance(tree, dict):
        return any(holds_shards(value) for value in tree.values())
    if isinstance(tree, list | tuple):
        return any(holds_shards(value) for value in tree)
    return False
