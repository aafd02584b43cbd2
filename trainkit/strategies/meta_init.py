"""Shard-first initialisation: layers created on the meta device are materialised rank by rank
as their own shards only, equal to the unsharded model initialised from the same seed.

Every rank replays the modules' ``reset_parameters()`` in registration order from the random
state the layers were declared at, one module's full parameters at a time, and keeps its own
slice: the peak holds the shards plus one module, never the whole model."""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import torch
from torch import nn

from trainkit.errors import MisconfigurationError


def has_meta_parameters(module: nn.Module, recurse: bool = True) -> bool:
    """Whether a parameter or buffer of ``module`` (or only its own, without ``recurse``) lives
    on the meta device (no storage)."""
    tensors = [*module.parameters(recurse=recurse), *module.buffers(recurse=recurse)]
    return any(t.is_meta for t in tensors)


def materialize(module: nn.Module, device: torch.device, rng_state: torch.Tensor | None) -> None:
    """Give every meta tensor of the (already sharded) ``module`` storage on ``device`` and the
    values the unsharded model would get from ``rng_state``; each rank writes its shard only."""
    meta_owners: list[tuple[nn.Module, Callable[[], object]]] = []  # (layer, its reset_parameters)
    for sub in module.modules():
        if not has_meta_parameters(sub, recurse=False):
            continue
        reset = getattr(sub, "reset_parameters", None)
        if not callable(reset):
            raise MisconfigurationError(
                f"{type(sub).__name__} was created on the meta device (configure_model under "
                "fsdp, or init_module(empty_init=True)) but defines no reset_parameters(), so "
                "its weights cannot be initialised shard by shard; add reset_parameters() to "
                f"{type(sub).__name__} or create it in __init__"
            )
        meta_owners.append((sub, reset))
    module.to_empty(device=device)
    if rng_state is not None:
        torch.set_rng_state(rng_state)
    for sub, reset in meta_owners:
        _initialise_shards(sub, reset, device)


def _initialise_shards(
    module: nn.Module, reset: Callable[[], object], device: torch.device
) -> None:
    """``reset`` (``module.reset_parameters``) on full-size stand-ins of its own parameters, then each
    stand-in's slice copied into the rank's shard (a plain tensor is copied whole)."""
    originals = dict(module.named_parameters(recurse=False))
    for name, param in originals.items():
        full = torch.empty(param.shape, dtype=param.dtype, device=device)
        setattr(module, name, nn.Parameter(full, requires_grad=param.requires_grad))
    try:
        with torch.no_grad():
            reset()
            for name, param in originals.items():
                _copy_own_slice(getattr(module, name), param)
    finally:
        for name, param in originals.items():
            setattr(module, name, param)


def _copy_own_slice(full: torch.Tensor, target: torch.Tensor) -> None:
    """Copy the part of ``full`` that ``target`` holds: a DTensor's local shard, or all of it."""
    to_local = getattr(target, "to_local", None)
    if to_local is None:
        target.copy_(full)
        return
    from torch.distributed.tensor import DTensor, distribute_tensor

    local = to_local()
    shard = cast(DTensor, target)  # it has to_local: a DTensor
    placed = distribute_tensor(full, shard.device_mesh, shard.placements, src_data_rank=None)
    local.copy_(placed.to_local())
