"""``lightning.fabric.utilities.apply_func``: move a nested batch to a device, numbers to
tensors and one-element tensors to numbers."""

from trainkit.utilities.apply_func import (
    apply_to_collection,
    convert_tensors_to_scalars,
    convert_to_tensors,
    move_data_to_device,
)

__all__ = [
    "apply_to_collection",
    "convert_tensors_to_scalars",
    "convert_to_tensors",
    "move_data_to_device",
]
