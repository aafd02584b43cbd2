"""Rank-aware helpers: rank_zero_only, barrier, reductions used by ``sync_dist``."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

# the decorator Lightning and torchmetrics use; sharing it means one rank to set for all three
from lightning_utilities.core.rank_zero import rank_zero_only

if TYPE_CHECKING:
    import torch
    from torch.distributed import ProcessGroup

__all__ = [
    "RANK_VARIABLES",
    "all_reduce",
    "barrier",
    "global_rank",
    "rank_from_environment",
    "rank_zero_info",
    "rank_zero_only",
    "set_rank",
]


RANK_VARIABLES = ("RANK", "LOCAL_RANK", "SLURM_PROCID", "JSM_NAMESPACE_RANK")


def rank_from_environment(env: Mapping[str, str] | None = None) -> int | None:
    """The global rank a launcher gave this process, from the first of ``RANK_VARIABLES`` set
    (None when none is: a single process, or a launcher that says nothing)."""
    env = os.environ if env is None else env
    for key in RANK_VARIABLES:
        if env.get(key, "").strip().isdigit():
            return int(env[key])
    return None


def global_rank() -> int:
    """This process's global rank (0 outside a distributed job)."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        return dist.get_rank()
    return int(os.environ.get("RANK", 0))


def set_rank(rank: int) -> None:
    """Tell ``rank_zero_only`` (Lightning's, torchmetrics' and trainkit's: one object) which
    rank this process is; the stage calls it once the strategy knows."""
    rank_zero_only.rank = rank  # pyright: ignore[reportFunctionMemberAccess]


# valid from import on, as in Lightning: a program may log before any Trainer exists; a rank
# variable wins over what torchmetrics guessed from LOCAL_RANK alone
_launched_rank = rank_from_environment()
if _launched_rank is not None or getattr(rank_zero_only, "rank", None) is None:
    set_rank(_launched_rank or 0)


@rank_zero_only
def rank_zero_info(*args: object, stacklevel: int = 4, **kwargs: Any) -> None:
    """``print`` on global rank 0 only (``stacklevel``: accepted as Lightning's, unused)."""
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


def group_gather(
    group: ProcessGroup | None, sync_grads: bool
) -> Callable[[torch.Tensor], torch.Tensor]:
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
