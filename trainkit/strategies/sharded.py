"""ShardedStrategy: fairscale's OSS (optimizer state sharded over ranks) + ShardedDataParallel
(each gradient reduced only to the rank that owns its optimizer shard)."""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any, cast

import torch
from torch import nn

from trainkit.strategies.parallel import ParallelStrategy
from trainkit.strategies.step_forwarder import StepForwarder

if TYPE_CHECKING:
    from fairscale.nn.data_parallel import ShardedDataParallel
    from fairscale.optim import OSS

    from trainkit.module import TrainModule
    from trainkit.optim import SchedulerConfig


def constructor_defaults(optimizer: torch.optim.Optimizer) -> dict[str, Any]:
    """The optimizer's defaults that its class's constructor takes: torch's AdamW keeps
    ``decoupled_weight_decay`` in its defaults (it is an Adam) but does not take it."""
    accepted = inspect.signature(type(optimizer).__init__).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in accepted.values()):
        return dict(optimizer.defaults)
    return {k: v for k, v in optimizer.defaults.items() if k in accepted}


class ShardedStrategy(ParallelStrategy):
    """``ddp_sharded`` (alias ``sharded``): ddp with 1/N of the optimizer state on each rank."""

    name = "ddp_sharded"
    shards_state = True
    zero_grad_set_to_none = False  # its gradient-reduce hooks diverge from ddp on freed grads

    def setup_module(self, module: nn.Module) -> nn.Module:
        # wrapped once the optimizers exist
        return StepForwarder(self.with_batchnorm_synced(module).to(self.root_device))

    def grad_scaler(self) -> torch.amp.GradScaler | None:
        """fp16 needs fairscale's ShardedGradScaler: each rank only sees its shard's gradients."""
        from fairscale.optim.grad_scaler import ShardedGradScaler

        return ShardedGradScaler()

    def setup_optimizers(
        self,
        wrapped: nn.Module,
        optimizers: list[torch.optim.Optimizer],
        schedulers: list[SchedulerConfig],
    ):
        """Rebuild each optimizer as an OSS shard and wrap the module in ShardedDataParallel."""
        from fairscale.nn.data_parallel import ShardedDataParallel
        from fairscale.optim import OSS

        sharded = []
        for optimizer in optimizers:
            kind = type(optimizer)
            oss = OSS(params=optimizer.param_groups, optim=kind, **constructor_defaults(optimizer))
            for config in schedulers:
                if config.scheduler.optimizer is optimizer:
                    config.scheduler.optimizer = oss
            sharded.append(oss)
        return ShardedDataParallel(wrapped, sharded), sharded

    def training_step_fn(self, wrapped: nn.Module, module: TrainModule) -> Any:
        return wrapped

    def no_backward_sync(self, wrapped: nn.Module) -> Any:
        # setup_optimizers wrapped the module in ShardedDataParallel
        return cast("ShardedDataParallel", wrapped).no_sync()

    def optimizer_state_dict(self, optimizer: torch.optim.Optimizer) -> dict[str, Any]:
        """Consolidated on rank 0 (a collective), in plain PyTorch format: loads into any optimizer."""
        cast("OSS", optimizer).consolidate_state_dict(recipient_rank=0)  # setup_optimizers made it
        return optimizer.state_dict() if self.is_global_zero else {}
