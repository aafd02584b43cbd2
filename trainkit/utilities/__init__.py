"""Lightning's ``utilities``: rank-zero helpers, ``CombinedLoader``, ``grad_norm``,
``measure_flops`` and the rest, at Lightning's paths (``from trainkit.utilities import
rank_zero_only``). Each name loads on first use; the submodules hold the rest
(``trainkit.utilities.types``, ``.model_summary``, ``.memory``, ``.seed``...)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from trainkit.common.lazy import lazy_exports

_LAZY = {
    "AttributeDict": "trainkit.hparams",
    "CombinedLoader": "trainkit.utilities.combined_loader",
    "GradClipAlgorithmType": "trainkit.utilities.enums",
    "LightningEnum": "trainkit.utilities.enums",
    "disable_possible_user_warnings": "trainkit.utilities.warnings",
    "find_shared_parameters": "trainkit.utilities.parameter_tying",
    "set_shared_parameters": "trainkit.utilities.parameter_tying",
    "grad_norm": "trainkit.utilities.grads",
    "is_picklable": "trainkit.utilities.parsing",
    "is_shared_filesystem": "trainkit.utilities.cloud_io",
    "measure_flops": "trainkit.utilities.flops",
    "move_data_to_device": "trainkit.utilities.apply_func",
    "rank_zero_deprecation": "trainkit.utilities.rank_zero",
    "rank_zero_info": "trainkit.utilities.rank_zero",
    "rank_zero_only": "trainkit.utilities.rank_zero",
    "rank_zero_warn": "trainkit.utilities.rank_zero",
    "suggested_max_num_workers": "trainkit.utilities.data",
}

if TYPE_CHECKING:  # what type checkers and editors see; at run time each loads on first use
    from trainkit.hparams import AttributeDict
    from trainkit.utilities.apply_func import move_data_to_device
    from trainkit.utilities.cloud_io import is_shared_filesystem
    from trainkit.utilities.combined_loader import CombinedLoader
    from trainkit.utilities.data import suggested_max_num_workers
    from trainkit.utilities.enums import GradClipAlgorithmType, LightningEnum
    from trainkit.utilities.flops import measure_flops
    from trainkit.utilities.grads import grad_norm
    from trainkit.utilities.parameter_tying import find_shared_parameters, set_shared_parameters
    from trainkit.utilities.parsing import is_picklable
    from trainkit.utilities.rank_zero import (
        rank_zero_deprecation,
        rank_zero_info,
        rank_zero_only,
        rank_zero_warn,
    )
    from trainkit.utilities.warnings import disable_possible_user_warnings

__all__ = [
    "AttributeDict",
    "CombinedLoader",
    "GradClipAlgorithmType",
    "LightningEnum",
    "disable_possible_user_warnings",
    "find_shared_parameters",
    "grad_norm",
    "is_picklable",
    "is_shared_filesystem",
    "measure_flops",
    "move_data_to_device",
    "rank_zero_deprecation",
    "rank_zero_info",
    "rank_zero_only",
    "rank_zero_warn",
    "set_shared_parameters",
    "suggested_max_num_workers",
]


__getattr__, __dir__ = lazy_exports(__name__, _LAZY, __all__)
