"""The part of a parameter this rank holds, whatever strategy sharded it."""

from __future__ import annotations

import torch


def local_part(parameter: torch.Tensor) -> torch.Tensor:
    """This rank's elements of ``parameter``: its DeepSpeed ZeRO-3 partition, the local shard of
    a DTensor (FSDP2), or the whole tensor where nothing is sharded."""
    partition = getattr(parameter, "ds_tensor", None)
    if isinstance(partition, torch.Tensor):
        return partition
    to_local = getattr(parameter, "to_local", None)
    local = to_local() if callable(to_local) else parameter
    return local if isinstance(local, torch.Tensor) else parameter
