"""DDP2Strategy: one process per node; dp across the node's devices, gradients averaged across nodes.

``*_step_end`` sees the whole node's batch (e.g. for a softmax or contrastive loss over it). The
DataLoader batch is per node, so the effective batch is ``batch x num_nodes x accumulate``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
import torch.distributed as dist
from torch import nn

from trainkit.scaling import BatchLoading
from trainkit.strategies.base import NO_CLUSTER, Placement
from trainkit.strategies.dp import DataParallelStrategy
from trainkit.strategies.parallel import ParallelStrategy, average_gradients

if TYPE_CHECKING:
    from trainkit.module import TrainModule


class DDP2Strategy(ParallelStrategy):
    """``ddp2``: a process per node, dp inside it, gradient all-reduce between nodes."""

    name = "ddp2"
    process_per_device = False
    batch_loading = BatchLoading.PER_NODE

    def connect(self, placement: Placement) -> None:
        super().connect(placement)
        self._dp = DataParallelStrategy()
        self._dp.connect(
            dataclasses.replace(placement, num_nodes=1, cluster=NO_CLUSTER)
        )  # this node's

    def describe(self) -> str:
        return "ddp2 (one process per node, dp over its devices)"

    @property
    def root_device(self) -> torch.device:
        return self._dp.root_device

    def setup_module(self, module: nn.Module) -> nn.Module:
        module = module.to(self.root_device)
        for tensor in module.state_dict().values():  # every node starts from rank 0's weights
            dist.broadcast(tensor, src=0)
        return module

    def training_step_fn(
        self, wrapped: nn.Module, module: TrainModule
    ) -> Callable[[Any, int], Any]:
        return self._dp.training_step_fn(wrapped, module)

    def step_fn(self, module: TrainModule, name: str) -> Callable[..., Any]:
        return self._dp.step_fn(module, name)

    def default_step_end(self) -> Callable[[Any], Any] | None:
        return self._dp.default_step_end()

    def gradient_sync_fn(self) -> Callable[[list[torch.Tensor]], None] | None:
        """No wrapper syncs here: gradients are averaged once, right before the optimizer step."""
        return average_gradients
