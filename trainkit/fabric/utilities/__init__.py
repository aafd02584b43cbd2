"""``lightning.fabric.utilities`` (and ``lightning_fabric.utilities``): the names its package
exports, each loaded on first use; its modules (``cloud_io``, ``seed``, ``apply_func``...) are
beside this file."""

from __future__ import annotations

from typing import TYPE_CHECKING

from trainkit.common.lazy import lazy_exports

_LAZY = {
    "AttributeDict": "trainkit.fabric.utilities.data",
    "LightningEnum": "trainkit.fabric.utilities.enums",
    "disable_possible_user_warnings": "trainkit.fabric.utilities.warnings",
    "is_shared_filesystem": "trainkit.fabric.utilities.distributed",
    "measure_flops": "trainkit.utilities.flops",
    "move_data_to_device": "trainkit.fabric.utilities.apply_func",
    "rank_zero_deprecation": "trainkit.fabric.utilities.rank_zero",
    "rank_zero_info": "trainkit.fabric.utilities.rank_zero",
    "rank_zero_only": "trainkit.fabric.utilities.rank_zero",
    "rank_zero_warn": "trainkit.fabric.utilities.rank_zero",
    "suggested_max_num_workers": "trainkit.fabric.utilities.data",
}

if TYPE_CHECKING:  # what type checkers and editors see; at run time each loads on first use
    from trainkit.fabric.utilities.apply_func import move_data_to_device
    from trainkit.fabric.utilities.data import AttributeDict, suggested_max_num_workers
    from trainkit.fabric.utilities.distributed import is_shared_filesystem
    from trainkit.fabric.utilities.enums import LightningEnum
    from trainkit.fabric.utilities.rank_zero import (
        rank_zero_deprecation,
        rank_zero_info,
        rank_zero_only,
        rank_zero_warn,
    )
    from trainkit.fabric.utilities.warnings import disable_possible_user_warnings
    from trainkit.utilities.flops import measure_flops

__all__ = [
    "AttributeDict",
    "LightningEnum",
    "disable_possible_user_warnings",
    "is_shared_filesystem",
    "measure_flops",
    "move_data_to_device",
    "rank_zero_deprecation",
    "rank_zero_info",
    "rank_zero_only",
    "rank_zero_warn",
    "suggested_max_num_workers",
]


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, __all__)
