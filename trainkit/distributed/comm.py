"""Rank-aware helpers: rank_zero_only, barrier, reductions used by ``sync_dist``."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
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
