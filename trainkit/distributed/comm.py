"""Rank-aware helpers: rank_zero_only, barrier, reductions used by ``sync_dist``."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    import torch

F = TypeVar("F", bound=Callable[..., Any])


def global_rank() -> int:
    """This process's global rank (0 outside a distributed job)."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank()
    return int(os.environ.get("RANK", 0))


def rank_zero_only(fn: F) -> F:
    """Run ``fn`` on global rank 0 only; other ranks get None."""

    @functools.wraps(fn)
    def wrapped(*args: object, **kwargs: object) -> Any:
        if global_rank() == 0:
            return fn(*args, **kwargs)
        return None

    return wrapped  # type: ignore[return-value]


@rank_zero_only
def rank_zero_info(*args: object, **kwargs: Any) -> None:
    """``print`` on global rank 0 only."""
    print(*args, **kwargs, flush=True)


def barrier() -> None:
    """Wait for every rank (a no-op outside a process group)."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.barrier()


def all_reduce(tensor: torch.Tensor, op: str = "mean") -> torch.Tensor:
    """Reduce ``tensor`` over every rank with ``mean``, ``sum``, ``max`` or ``min``."""
    import torch.distributed as dist

    if not (dist.is_available() and dist.is_initialized()):
        return tensor
    ops = {
        "mean": dist.ReduceOp.SUM,
        "sum": dist.ReduceOp.SUM,
        "max": dist.ReduceOp.MAX,
        "min": dist.ReduceOp.MIN,
    }
    if op not in ops:
        raise ValueError(f"reduce op {op!r}; expected one of {sorted(ops)}")
    tensor = tensor.clone()
    dist.all_reduce(tensor, op=ops[op])
    if op == "mean":
        tensor = tensor / dist.get_world_size()
    return tensor


def group_gather(group: Any, sync_grads: bool) -> Callable[[torch.Tensor], torch.Tensor]:
    """All-gather a tensor over ``group`` (None: every rank), stacked along a new first
    dimension; ``sync_grads``: the gather is differentiable."""
    import torch
    import torch.distributed as dist

    def gather(tensor: torch.Tensor) -> torch.Tensor:
        if sync_grads:
            from torch.distributed.nn.functional import all_gather

            return torch.stack(all_gather(tensor.contiguous(), group=group))
        parts = [torch.zeros_like(tensor) for _ in range(dist.get_world_size(group))]
        dist.all_gather(parts, tensor.contiguous(), group=group)
        return torch.stack(parts)

    return gather


def gather_nested(
    data: object, gather: Callable[[torch.Tensor], torch.Tensor], device: torch.device
) -> Any:
    """``gather`` of each tensor in ``data`` (a tensor, a number, made a tensor on ``device``,
    or a dict/list/tuple of them); anything else unchanged."""
    import torch

    if isinstance(data, Mapping):
        return {key: gather_nested(item, gather, device) for key, item in data.items()}
    if isinstance(data, list | tuple):
        return type(data)(gather_nested(item, gather, device) for item in data)
    if isinstance(data, int | float | bool):
        data = torch.tensor(data, device=device)
    return gather(data) if isinstance(data, torch.Tensor) else data
