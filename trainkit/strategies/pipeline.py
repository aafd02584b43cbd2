"""PipelineStrategy: split the module's ``sequential_module`` across ranks, one stage per rank,
and train with a microbatched schedule from ``torch.distributed.pipelining`` (GPipe or 1F1B).

The module provides ``sequential_module`` (an ``nn.Sequential``), ``pipeline_loss(output, target)``
and, if its batches are not ``(input, target)``, ``pipeline_batch(batch) -> (input, target)``.
trainkit runs the schedule in place of ``training_step``/``validation_step``/``test_step`` and logs
``train_loss``/``val_loss``/``test_loss`` from the last stage on every rank.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist
from torch import nn
from torch.utils.checkpoint import checkpoint

from trainkit.errors import ConfigError, MisconfigurationError
from trainkit.scaling import BatchLoading
from trainkit.strategies.base import Placement
from trainkit.strategies.parallel import ParallelStrategy

if TYPE_CHECKING:
    from trainkit.module import TrainModule

SCHEDULES = ("gpipe", "1f1b")
CHECKPOINTING = ("never", "always", "except_last")


class _Checkpointed(nn.Module):
    """Recompute this layer's activations in backward instead of storing them."""

    def __init__(self, layer: nn.Module) -> None:
        super().__init__()
        self.layer = layer

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return checkpoint(self.layer, x, use_reentrant=False)


class PipelineStrategy(ParallelStrategy):
    """``pipeline``: sequential model parallel over ranks (one stage each), microbatched."""

    name = "pipeline"
    batch_loading = BatchLoading.SHARED

    def __init__(
        self,
        balance: list[int] | None = None,
        microbatches: int = 4,
        schedule: str = "gpipe",
        checkpoint: str = "except_last",
        process_group_backend: str | None = None,
        timeout: float | None = None,
    ) -> None:
        """
        Args:
            balance: Layers of sequential_module per stage, e.g. [2, 2]; one stage per rank.
            microbatches: Microbatches each batch is cut into (the batch must divide evenly).
            schedule: 'gpipe' (all forwards, then all backwards) or '1f1b' (interleaved, less memory).
            checkpoint: Activation checkpointing: 'never', 'always' or 'except_last' stage.
            process_group_backend: Override the backend (gloo on CPU, nccl on GPU).
            timeout: Seconds a collective waits for a late rank (default $TRAINKIT_COLLECTIVE_TIMEOUT, else torch's).
        """
        super().__init__(process_group_backend=process_group_backend, timeout=timeout)
        if schedule not in SCHEDULES:
            raise ConfigError("pipeline schedule", schedule, "'gpipe' or '1f1b'")
        if checkpoint not in CHECKPOINTING:
            raise ConfigError(
                "pipeline checkpoint", checkpoint, "'never', 'always' or 'except_last'"
            )
        if not balance or any(not isinstance(n, int) or n < 1 for n in balance):
            raise ConfigError(
                "pipeline balance",
                balance,
                "a list of positive layer counts, one per stage",
                "e.g. balance: [2, 2] for two stages",
            )
        self.balance = list(balance)
        self.microbatches = microbatches
        self.schedule_name = schedule
        self.checkpoint = checkpoint
        self._schedule: Any = None
        self._local_keys: set[str] = set()

    def connect(self, placement: Placement) -> None:
        super().connect(placement)
        if self.world_size != len(self.balance):
            raise ConfigError(
                "pipeline balance",
                self.balance,
                f"one stage per rank ({self.world_size} ranks)",
                f"use trainer.devices: {len(self.balance)} or a balance with {self.world_size} entries",
            )

    def distributed_sampler_kwargs(self) -> dict[str, int] | None:
        return None  # every stage walks the same batches in step

    @property
    def is_last_stage(self) -> bool:
        return self.global_rank == len(self.balance) - 1

    def check_module(self, module: nn.Module) -> None:
        """Fail before any rank starts when the module cannot be split as asked."""
        self.checked_layers(module)

    def checked_layers(self, module: nn.Module) -> nn.Sequential:
        """The module's ``sequential_module``, once it is known to split as asked."""
        sequential = getattr(module, "sequential_module", None)
        name = type(module).__name__
        if not isinstance(sequential, nn.Sequential):
            raise ConfigError(
                "trainer.strategy",
                "pipeline",
                "a model with sequential_module: nn.Sequential",
                f"{name} has none; see docs/strategies.md#pipeline",
            )
        if not callable(getattr(module, "pipeline_loss", None)):
            raise ConfigError(
                "trainer.strategy",
                "pipeline",
                "a model with pipeline_loss(output, target)",
                f"define {name}.pipeline_loss",
            )
        if sum(self.balance) != len(sequential):
            raise ConfigError(
                "pipeline balance",
                self.balance,
                f"layer counts summing to {len(sequential)}",
                f"sequential_module has {len(sequential)} layers but balance covers {sum(self.balance)}",
            )
        return sequential

    def setup_module(self, module: nn.Module) -> nn.Module:
        from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe

        sequential = self.checked_layers(module)
        rank, stages = self.global_rank, len(self.balance)
        start = sum(self.balance[:rank])
        stop = start + self.balance[rank]
        layers = [sequential[i] for i in range(start, stop)]
        for index in range(len(sequential)):
            if not start <= index < stop:
                sequential[index] = nn.Identity()  # other stages' weights live on other ranks
        if self.checkpoint == "always" or (
            self.checkpoint == "except_last" and not self.is_last_stage
        ):
            layers = [_Checkpointed(layer) for layer in layers]
        module.to(self.root_device)
        self._local_keys = set(module.state_dict())
        stage = PipelineStage(nn.Sequential(*layers), rank, stages, self.root_device)
        schedule = {"gpipe": ScheduleGPipe, "1f1b": Schedule1F1B}[self.schedule_name]
        self._schedule = schedule(stage, self.microbatches, loss_fn=module.pipeline_loss)
        return module

    def training_step_fn(
        self, wrapped: nn.Module, module: TrainModule
    ) -> Callable[[Any, int], Any]:
        def step(batch: object, batch_idx: int) -> None:
            module.log("train_loss", self._run(module, batch, train=True), prog_bar=True)
            return None  # the schedule already ran backward

        return step

    def step_fn(self, module: TrainModule, name: str) -> Callable[..., Any]:
        if name == "predict_step":
            raise MisconfigurationError(
                "predict with strategy pipeline is not supported; load the checkpoint into the module "
                "on one device (checkpoints hold every stage)"
            )
        metric = {"validation_step": "val_loss", "test_step": "test_loss"}[name]

        def step(batch: object, batch_idx: int, *args: object) -> None:
            module.log(metric, self._run(module, batch, train=False), prog_bar=True)

        return step

    # batch: Any, indexed as (inputs, target) unless the module's pipeline_batch splits it
    def _run(self, module: TrainModule, batch: Any, train: bool) -> torch.Tensor:
        split: Callable[[Any], tuple[Any, Any]] | None = getattr(module, "pipeline_batch", None)
        inputs, target = split(batch) if callable(split) else (batch[0], batch[1])
        rank, last = self.global_rank, len(self.balance) - 1
        args = (inputs,) if rank == 0 else ()
        losses: list[torch.Tensor] = []
        kwargs = {"target": target, "losses": losses} if rank == last else {}
        run = self._schedule.step if train else self._schedule.eval
        run(*args, **kwargs)
        loss = (
            torch.stack(losses).mean().detach()
            if losses
            else torch.zeros((), device=self.root_device)
        )
        dist.broadcast(loss, src=last)
        return loss

    def module_state_dict(self, module: nn.Module) -> dict[str, Any]:
        """Every stage's weights merged (collective), so checkpoints load anywhere."""
        local = {
            k: v.detach().cpu() for k, v in module.state_dict().items() if k in self._local_keys
        }
        merged: dict[str, Any] = {}
        for part in self.all_gather_object(local):
            merged.update(part)
        return merged

    def load_module_state_dict(self, module: nn.Module, state: dict[str, Any]) -> None:
        module.load_state_dict({k: v for k, v in state.items() if k in self._local_keys})

    def optimizer_state_dict(self, optimizer: torch.optim.Optimizer) -> Any:
        return {"per_rank": self.all_gather_object(optimizer.state_dict())}

    def load_optimizer_state_dict(
        self, optimizer: torch.optim.Optimizer, state: dict[str, Any]
    ) -> None:
        optimizer.load_state_dict(state["per_rank"][self.global_rank])
