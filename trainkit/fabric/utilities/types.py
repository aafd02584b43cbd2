"""``lightning.fabric.utilities.types``: the aliases and protocols Lightning programs annotate
with."""

from torch.distributed import ReduceOp

from trainkit.utilities.types import _DEVICE, _MAP_LOCATION_TYPE, _PATH, Optimizable, Steppable

__all__ = ["_DEVICE", "_MAP_LOCATION_TYPE", "_PATH", "Optimizable", "ReduceOp", "Steppable"]
