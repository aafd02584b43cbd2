"""DeepSpeedStrategy: ZeRO stages 1-3 (optimizer state, gradients, parameters partitioned over the
ranks) with optional CPU offload, through the optional ``deepspeed`` package."""

from __future__ import annotations

import contextlib
import enum
import importlib.util
import io
import json
import logging
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast

import torch
from lightning_utilities.core.apply_func import apply_to_collection
from torch import nn

from trainkit.checkpoint.files import CheckpointError
from trainkit.distributed.comm import rank_from_environment
from trainkit.errors import ConfigError
from trainkit.strategies.base import Placement
from trainkit.strategies.op_builds import watched_op_builds
from trainkit.strategies.parallel import ParallelStrategy
from trainkit.strategies.step_forwarder import StepForwarder

if TYPE_CHECKING:
    from trainkit.module import TrainModule

CONFIG_ENV = "TRAINKIT_DEEPSPEED_CONFIG_PATH"
PRESETS: dict[str, dict[str, Any]] = {
    "deepspeed_stage_1": {"zero_optimization": {"stage": 1}},
    "deepspeed_stage_2": {"zero_optimization": {"stage": 2}},
    "deepspeed_stage_3": {"zero_optimization": {"stage": 3}},
    # offload presets keep the module's own torch optimizer (DeepSpeedCPUAdam is faster; set it in a config)
    "deepspeed_stage_2_offload": {
        "zero_optimization": {"stage": 2, "offload_optimizer": {"device": "cpu"}},
        "zero_force_ds_cpu_optimizer": False,
    },
    "deepspeed_stage_3_offload": {
        "zero_optimization": {
            "stage": 3,
            "offload_optimizer": {"device": "cpu"},
            "offload_param": {"device": "cpu"},
        },
        "zero_force_ds_cpu_optimizer": False,
    },
}


class ZeroOptimizer(Protocol):
    """What this strategy calls on the optimizer ``deepspeed.initialize`` returns (a ZeRO stage
    1/2 or stage 3 optimizer): its load takes every rank's partition."""

    def load_state_dict(
        self,
        state_dict_list: list[Any],
        load_optimizer_states: bool = ...,
        load_from_fp32_weights: bool = ...,
    ) -> Any: ...


def load_config(config: dict[str, Any] | str | None) -> dict[str, Any]:
    """A dict as given, a JSON file path, $TRAINKIT_DEEPSPEED_CONFIG_PATH, or ZeRO stage 2."""
    source = "strategy config"
    if config is None and os.environ.get(CONFIG_ENV):
        config, source = os.environ[CONFIG_ENV], CONFIG_ENV
    if config is None:
        return {"zero_optimization": {"stage": 2}}
    if isinstance(config, dict):
        return dict(config)
    path = Path(config)
    if not path.is_file():
        raise ConfigError(
            source,
            str(config),
            "a DeepSpeed JSON config file that exists, or a dict",
            "check the path",
        )
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as err:
        raise ConfigError(
            source, str(config), "valid JSON", f"line {err.lineno}: {err.msg}"
        ) from None


def errors_only(record: logging.LogRecord) -> bool:
    """A logging filter: errors pass, the rest is left to rank 0."""
    return record.levelno >= logging.ERROR


def import_deepspeed() -> Any:
    """``deepspeed``, imported without the optional ``mlflow`` import of its autotuner (a tool of
    deepspeed's own launcher that a training rank never runs): where mlflow is installed, that
    import cost each rank ~1.5 s of start-up. An mlflow already imported is left as it is. On
    ranks other than 0 deepspeed's log shows errors only (rank 0 shows the rest, once)."""
    ds_log = logging.getLogger("DeepSpeed")
    if (rank_from_environment() or 0) > 0 and errors_only not in ds_log.filters:
        ds_log.addFilter(errors_only)
    if "deepspeed" in sys.modules or "mlflow" in sys.modules:
        import deepspeed

        return deepspeed
    sys.modules["mlflow"] = None  # type: ignore[assignment]  # import mlflow -> ImportError
    try:
        import deepspeed
    finally:
        if sys.modules.get("mlflow", 0) is None:
            del sys.modules["mlflow"]
    return deepspeed


@contextlib.contextmanager
def local_rank_variable(local_rank: int) -> Iterator[None]:
    """$LOCAL_RANK set to ``local_rank`` inside the block where no launcher set it."""
    if "LOCAL_RANK" in os.environ:
        yield
        return
    os.environ["LOCAL_RANK"] = str(local_rank)
    try:
        yield
    finally:
        os.environ.pop("LOCAL_RANK", None)


class DeepSpeedStrategy(ParallelStrategy):
    """``deepspeed`` (and presets ``deepspeed_stage_1/2/3``, ``deepspeed_stage_2_offload/3_offload``)."""

    name = "deepspeed"
    shards_state = True
    scales_fp16_loss = True  # the engine's own dynamic loss scale (its fp16 section)
    supports_param_group_changes = False  # the engine owns the optimizer's groups
    zero_grad_set_to_none = False

    def __init__(
        self,
        config: dict[str, Any] | str | None = None,
        process_group_backend: str | None = None,
        timeout: float | None = None,
    ) -> None:
        """
        Args:
            config: A DeepSpeed config as a dict, or the path of a JSON file (default:
                $TRAINKIT_DEEPSPEED_CONFIG_PATH, else ZeRO stage 2). Batch-size and accumulation keys
                are set by trainkit.
            process_group_backend: Override the backend (gloo on CPU, nccl on GPU).
            timeout: Seconds a collective waits for a late rank (default $TRAINKIT_COLLECTIVE_TIMEOUT, else torch's).
        """
        super().__init__(process_group_backend=process_group_backend, timeout=timeout)
        self.config = load_config(config)
        self._engine: Any = None
        self._input_dtype: torch.dtype | None = None  # the engine's weights: fp16/bf16 sections
        self._set_local_rank = False  # setup_environment set $LOCAL_RANK (a process of one)

    @classmethod
    def preset(cls, name: str) -> DeepSpeedStrategy:
        return cls(config=PRESETS[name])

    def connect(self, placement: Placement) -> None:
        # found, not imported: importing deepspeed takes seconds, and the launcher that checks
        # the config before starting the ranks never uses it
        if importlib.util.find_spec("deepspeed") is None:
            raise ConfigError(
                "trainer.strategy",
                self.name,
                "the deepspeed package installed",
                "pip install -e '.[deepspeed]' in the trainkit checkout, or use the built-in strategy fsdp with cpu_offload: true",
            )
        if placement.gradient_clip_val and placement.gradient_clip_algorithm == "value":
            raise ConfigError(  # Lightning hands the value to deepspeed, which clips the norm
                "trainer.gradient_clip_algorithm",
                "value",
                f"'norm' with strategy {self.name} (its engine clips the gradients' total norm)",
                "use gradient_clip_algorithm: norm, or strategy ddp or fsdp to clip by value",
            )
        super().connect(placement)

    def describe(self) -> str:
        zero = self.config.get("zero_optimization", {})
        offload = [part for part in ("optimizer", "param") if f"offload_{part}" in zero]
        where = f", {' and '.join(offload)} offloaded to CPU" if offload else ""
        return f"deepspeed (ZeRO stage {self.stage}{where})"

    def setup_environment(self) -> None:
        """deepspeed reads $LOCAL_RANK while it trains too (ZeRO-3's checks), which no
        launcher sets for a process of one: this rank's, until ``teardown``."""
        if "LOCAL_RANK" not in os.environ:
            os.environ["LOCAL_RANK"] = str(self.local_rank)
            self._set_local_rank = True
        super().setup_environment()

    def teardown(self) -> None:
        super().teardown()
        if self._set_local_rank:
            os.environ.pop("LOCAL_RANK", None)
            self._set_local_rank = False

    @property
    def stage(self) -> int:
        return int(self.config.get("zero_optimization", {}).get("stage", 0))

    def module_init_context(self, empty_init: bool | None = None) -> Any:
        """ZeRO stage 3: ``deepspeed.zero.Init``, each layer partitioned as it is created (one
        full layer at a time); other stages: on the device."""
        if self.stage < 3 or empty_init is False:
            return super().module_init_context(empty_init)
        deepspeed = import_deepspeed()
        config = {"train_micro_batch_size_per_gpu": 1, **self.config}
        with self.building():
            return deepspeed.zero.Init(config_dict_or_path=config, remote_device=None)

    @contextlib.contextmanager
    def building(self) -> Iterator[None]:
        """Around deepspeed's set-up, which compiles or loads its communication and optimizer
        ops: a stale build lock refused, a build announced, and what deepspeed prints there (its
        config, "op built") shown by rank 0 only, the same on every rank. deepspeed asserts that
        $LOCAL_RANK is set, which no launcher does for a process of one: it gets this rank's."""
        quiet = contextlib.redirect_stdout(io.StringIO()) if not self.is_global_zero else None
        with (
            watched_op_builds(barrier=self.barrier),
            quiet or contextlib.nullcontext(),
            local_rank_variable(self.local_rank),
        ):
            yield

    def setup_module(self, module: nn.Module) -> nn.Module:
        # the engine wraps it once optimizers exist
        return StepForwarder(self.with_batchnorm_synced(module).to(self.root_device))

    def setup_optimizers(self, wrapped: nn.Module, optimizers: list[Any], schedulers: list[Any]):
        deepspeed = import_deepspeed()
        if len(optimizers) != 1:
            raise ConfigError(
                "configure_optimizers",
                f"{len(optimizers)} optimizers",
                "exactly one under deepspeed",
            )
        config = dict(self.config)
        config["train_micro_batch_size_per_gpu"] = config.get("train_micro_batch_size_per_gpu", 1)
        config["gradient_accumulation_steps"] = 1  # trainkit accumulates (no_backward_sync)
        # any torch optimizer, as Lightning's DeepSpeedStrategy allows
        config.setdefault("zero_allow_untested_optimizer", True)
        config.pop("train_batch_size", None)
        # the engine clips (the gradients are its partitions): the Trainer's norm, else none
        # (deepspeed's own default clips every step to a norm of 1.0)
        config.setdefault("gradient_clipping", self.placement.gradient_clip_val or 0.0)
        # mixed precision is the engine's (it turns torch's autocast off in its forward): its
        # fp16/bf16 section holds the weights in that type and scales the fp16 loss, as
        # Lightning's DeepSpeedStrategy configures it
        if self.precision == "bf16-mixed":
            config.setdefault("bf16", {"enabled": True})
        elif self.precision == "16-mixed":
            config.setdefault("fp16", {"enabled": True})
        self._input_dtype = engine_dtype(config)
        with self.building():
            engine, optimizer, _, _ = deepspeed.initialize(
                model=wrapped, optimizer=optimizers[0], config=config, dist_init_required=False
            )
        self._engine = engine
        return engine, [optimizer]

    def training_step_fn(self, wrapped: nn.Module, module: TrainModule) -> Any:
        return self._with_inputs_cast(wrapped)

    def step_fn(self, module: TrainModule, name: str) -> Callable[..., Any]:
        return self._with_inputs_cast(getattr(module, name))

    def _with_inputs_cast(self, step: Callable[..., Any]) -> Callable[..., Any]:
        """``step`` with the floating-point tensors of its batch cast to the engine's fp16 or
        bf16 (its weights' type), as Lightning's DeepSpeedPrecision.convert_input does."""

        def cast_step(batch: object, *args: Any) -> Any:
            dtype = self._input_dtype
            if dtype is not None:
                batch = apply_to_collection(batch, torch.Tensor, cast_floating, dtype)
            return step(batch, *args)

        return cast_step

    @contextlib.contextmanager
    def no_backward_sync(self, wrapped: nn.Module) -> Iterator[None]:
        """A micro-batch before the last of its accumulation window: the engine (configured
        for one micro-batch per step, its loss unscaled) is told it is not at a boundary, so
        ZeRO 1/2 accumulate into their partitions instead of reducing; trainkit scales the
        loss and calls ``step`` once, at the boundary."""
        self._engine.set_gradient_accumulation_boundary(False)
        try:
            yield
        finally:
            self._engine.set_gradient_accumulation_boundary(True)

    def backward_fn(self) -> Any:
        return self._engine.backward

    def optimizer_step_fn(self) -> Any:
        return self._engine.step  # optimizer step, gradient zeroing and partition bookkeeping

    def module_state_dict(self, module: nn.Module) -> dict[str, Any]:
        """Full weights for any device (stage 3 gathers its partitioned parameters: a collective)."""
        if self._engine is None or self.stage < 3:
            return {k: v.detach().cpu() for k, v in module.state_dict().items()}
        engine = (
            self._engine
        )  # deepspeed's stage-3 gather; the public save_16bit_model writes a file
        gathered = engine._zero3_consolidated_16bit_state_dict() or {}  # noqa: SLF001 (see above)
        prefix = "module."
        return {k.removeprefix(prefix): v.float().cpu() for k, v in gathered.items()}

    def optimizer_state_dict(self, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
        """Every rank's partition (a collective), each an opaque byte tensor: the checkpoint itself
        stays loadable with weights_only=True anywhere; only a deepspeed resume unpickles these."""
        buffer = io.BytesIO()
        torch.save(_cpu(optimizer.state_dict()), buffer)
        blob = torch.frombuffer(bytearray(buffer.getvalue()), dtype=torch.uint8)
        return {"per_rank": self.all_gather_object(blob)}

    def load_module_state_dict(self, module: nn.Module, state: dict[str, Any]) -> None:
        if self._engine is not None and self.stage >= 3:
            import deepspeed

            with deepspeed.zero.GatheredParameters(list(module.parameters()), modifier_rank=0):
                if self.is_global_zero:
                    module.load_state_dict(state)
            return
        module.load_state_dict(state)

    def load_optimizer_state_dict(
        self, optimizer: torch.optim.Optimizer, state: dict[str, Any]
    ) -> None:
        saved = len(state["per_rank"])
        if saved != self.world_size:
            raise CheckpointError(
                f"the checkpoint holds the optimizer partitions of {saved} deepspeed rank(s), "
                f"this run has {self.world_size}: resume it on {saved} (trainer.devices x "
                "num_nodes), or start a new fit from its full weights with "
                "YourModel.load_from_checkpoint(path)"
            )
        from deepspeed.runtime.fp16.loss_scaler import DynamicLossScaler, LossScaler
        from deepspeed.utils.tensor_fragment import fragment_address

        allowed = [LossScaler, DynamicLossScaler, fragment_address]  # DeepSpeed's own state classes
        with torch.serialization.safe_globals(allowed):
            states = [
                torch.load(io.BytesIO(blob.numpy().tobytes()), weights_only=True)
                for blob in state["per_rank"]
            ]
        # the engine's ZeRO optimizer (setup_optimizers returned it)
        cast(ZeroOptimizer, optimizer).load_state_dict(states, load_from_fp32_weights=True)


def engine_dtype(config: dict[str, Any]) -> torch.dtype | None:
    """The type the engine keeps the weights in: fp16 or bf16 when that section is enabled."""
    for key, dtype in (
        ("fp16", torch.float16),
        ("bf16", torch.bfloat16),
        ("bfloat16", torch.bfloat16),
    ):
        if config.get(key, {}).get("enabled"):
            return dtype
    return None


def cast_floating(tensor: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """``tensor`` in ``dtype`` when it holds floating-point numbers, else as it is."""
    return tensor.to(dtype) if torch.is_floating_point(tensor) else tensor


def _cpu(value: object) -> Any:
    """Tensors to CPU and enums to their values, so a weights-only load accepts the state."""
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, torch.Tensor):
        return value.detach().cpu()
    if isinstance(value, dict):
        return {k: _cpu(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_cpu(v) for v in value)
    return value
