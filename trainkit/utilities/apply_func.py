"""Lightning's collection helpers (``lightning.fabric.utilities.apply_func``): move a nested
batch to a device, turn numbers into tensors and one-element tensors into numbers."""

from __future__ import annotations

from abc import ABC
from typing import Any

import numpy as np
import torch
from lightning_utilities.core.apply_func import apply_to_collection
from torch import Tensor

__all__ = [
    "apply_to_collection",
    "convert_tensors_to_scalars",
    "convert_to_tensors",
    "move_data_to_device",
]

# devices a tensor is copied to synchronously (MPS: a non-blocking copy can race)
BLOCKING_DEVICES = ("cpu", "mps")


class Movable(ABC):  # noqa: B024 (an isinstance test, no abstract method)
    """What ``move_data_to_device`` moves: any object with a callable ``to`` (not a class)."""

    @classmethod
    def __subclasshook__(cls, subclass: type) -> bool:
        return callable(getattr(subclass, "to", None))

    def to(self, *args: Any, **kwargs: Any) -> Any:
        """What the object defines (this class is only a test of it)."""
        raise NotImplementedError


def move_data_to_device(batch: Any, device: torch.device | str | int) -> Any:
    """``batch`` (nested lists, tuples, dicts, dataclasses...) with every object that has a
    ``to`` method moved by it, the rest left as it is; tensors go to an accelerator without
    blocking. An object whose ``to`` returns None stays the object."""
    if isinstance(device, str | int):
        device = torch.device(device)

    def move(data: Movable) -> object:
        non_blocking = isinstance(data, Tensor) and device.type not in BLOCKING_DEVICES
        moved = data.to(device, non_blocking=True) if non_blocking else data.to(device)
        return data if moved is None else moved

    return apply_to_collection(batch, dtype=Movable, function=move)


def convert_to_tensors(data: object, device: torch.device | str | int) -> Any:
    """Numbers and numpy arrays in ``data`` as tensors (bool as uint8, int as int32, float as
    float32), and everything moved to ``device``."""
    data = apply_to_collection(data, bool, lambda v: torch.tensor(v, dtype=torch.uint8))
    data = apply_to_collection(data, int, lambda v: torch.tensor(v, dtype=torch.int))
    data = apply_to_collection(data, float, lambda v: torch.tensor(v, dtype=torch.float))
    data = apply_to_collection(data, np.ndarray, torch.from_numpy)
    return move_data_to_device(data, device)


def convert_tensors_to_scalars(data: object) -> Any:
    """``data`` with every tensor replaced by its single number (a ValueError names a tensor
    of several elements)."""

    def item(value: Tensor) -> int | float | bool:
        if value.numel() != 1:
            raise ValueError(
                f"convert_tensors_to_scalars got a tensor of shape {tuple(value.shape)}; "
                "expected one element; reduce it first (value.mean())"
            )
        return value.item()

    return apply_to_collection(data, Tensor, item)
