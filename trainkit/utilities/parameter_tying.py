"""Tied parameters (one Parameter used by several layers): find them, and tie them again after
something (a device move, a copy) split them."""

from __future__ import annotations

from torch import nn


def find_shared_parameters(module: nn.Module) -> list[list[str]]:
    """The names of each Parameter reached under more than one name, grouped per Parameter."""
    names: dict[int, list[str]] = {}
    for name, param in module.named_parameters(remove_duplicate=False):
        names.setdefault(id(param), []).append(name)
    return [group for group in names.values() if len(group) > 1]


def set_shared_parameters(module: nn.Module, shared_params: list[list[str]]) -> nn.Module:
    """Make every name in each group of ``shared_params`` refer to its first name's Parameter."""
    for group in shared_params:
        first = module.get_parameter(group[0])
        for name in group[1:]:
            owner_name, _, attribute = name.rpartition(".")
            setattr(module.get_submodule(owner_name), attribute, first)
    return module
