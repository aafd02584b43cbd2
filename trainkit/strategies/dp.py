"""DataParallelStrategy: one process; each batch is split across the node's devices, replicas run
in parallel, and their outputs are gathered on the root device for ``*_step_end``.

Without GPUs the split is simulated: the batch is cut into ``devices`` chunks that run one after
another on the CPU (same semantics, no speed-up; use ddp for parallel CPU training).
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from trainkit.errors import ConfigError
from trainkit.scaling import BatchLoading
from trainkit.strategies.base import Placement
from trainkit.strategies.parallel import ParallelStrategy


def split_batch(batch: object, chunks: int) -> list[Any]:
    """Cut every tensor of a (nested) batch into ``chunks`` pieces along the first dimension."""
    if isinstance(batch, torch.Tensor):
        return list(torch.chunk(batch, chunks))
    if isinstance(batch, dict):
        parts = {key: split_batch(value, chunks) for key, value in batch.items()}
        count = min(len(p) for p in parts.values())
        return [{key: parts[key][i] for key in parts} for i in range(count)]
    if isinstance(batch, list | tuple):
        parts = [split_batch(value, chunks) for value in batch]
        count = min(len(p) for p in parts)
        return [type(batch)(p[i] for p in parts) for i in range(count)]
    return [batch] * chunks


def gather_outputs(outputs: list[Any]) -> Any:
    """Concatenate per-device outputs along dim 0 (scalars become a vector), like DataParallel."""
    first = outputs[0]
    if isinstance(first, torch.Tensor):
        return torch.cat([o.unsqueeze(0) if o.dim() == 0 else o for o in outputs])
    if isinstance(first, dict):
        return {key: gather_outputs([o[key] for o in outputs]) for key in first}
    if isinstance(first, list | tuple):
        return type(first)(gather_outputs(list(group)) for group in zip(*outputs))
    return outputs


def mean_of_devices(output: object) -> Any:
    """The default ``*_step_end`` under dp: average what the devices returned."""
    if isinstance(output, torch.Tensor) and output.is_floating_point():
        return output.mean()
    if isinstance(output, dict):
        return {key: mean_of_devices(value) for key, value in output.items()}
    return output


class _Step(nn.Module):
    """Runs one named step of the module as a forward, so DataParallel can replicate it."""

    def __init__(self, module: nn.Module, name: str) -> None:
        super().__init__()
        self.module = module
        self.name = name

    def forward(self, *args: object) -> Any:
        return getattr(self.module, self.name)(*args)


class DataParallelStrategy(ParallelStrategy):
    """``dp``: data parallel inside one process over the listed devices of one machine."""

    name = "dp"
    process_per_device = False
    is_distributed = False  # one process: no process group, collectives are identities
    batch_loading = BatchLoading.PER_NODE

    def connect(self, placement: Placement) -> None:
        super().connect(placement)
        if placement.num_nodes > 1:
            raise ConfigError(
                "trainer.strategy",
                self.name,
                "one machine (num_nodes: 1)",
                "use ddp2 (dp inside each node, ddp across nodes) or ddp",
            )

    def describe(self) -> str:
        return f"dp (one process; each batch split over {self.selection.count} devices)"

    @property
    def root_device(self) -> torch.device:
        if self.selection.accelerator == "gpu":
            return torch.device("cuda", self.selection.ids[0])
        return torch.device("cpu")

    def setup_environment(self) -> None:
        super().setup_environment()
        if self.selection.accelerator == "cpu" and self.selection.count > 1:
            print(
                f"trainkit: dp on CPU splits each batch into {self.selection.count} chunks run one after "
                "another (no speed-up); use strategy: ddp for parallel CPU processes",
                file=sys.stderr,
            )

    def step_fn(self, module: nn.Module, name: str) -> Callable[..., Any]:
        """``name`` (training_step, validation_step, ...) run across the devices, outputs gathered."""
        if self.selection.count == 1:
            return getattr(module, name)
        return functools.partial(self._parallel, _Step(module, name))

    def training_step_fn(self, wrapped: nn.Module, module: nn.Module) -> Callable[[Any, int], Any]:
        return self.step_fn(module, "training_step")

    def default_step_end(self) -> Callable[[Any], Any] | None:
        return mean_of_devices if self.selection.count > 1 else None

    # batch: Any, as torch's scatter takes it (typed there as tensors or collections of them;
    # anything else is copied to each device as is)
    def _parallel(self, step: _Step, batch: Any, *args: object) -> Any:
        if self.selection.accelerator != "gpu":
            return gather_outputs(
                [step(chunk, *args) for chunk in split_batch(batch, self.selection.count)]
            )
        devices = list(self.selection.ids)
        inputs = nn.parallel.scatter(batch, devices)
        replicas = nn.parallel.replicate(step, devices[: len(inputs)])
        outputs = nn.parallel.parallel_apply(
            replicas, [(b, *args) for b in inputs], devices=devices[: len(inputs)]
        )
        return nn.parallel.gather(outputs, self.root_device)
