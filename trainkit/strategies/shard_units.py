"""Which submodules fsdp shards as units of their own (gathered, used and freed one at a time).

A unit's full parameters exist on a rank only while that unit runs; parameters in no smaller unit
belong to the root unit, gathered whole for the step. With the root as the only unit, every rank
holds the whole model's parameters and gradients during every step on top of its shards, so by
default every module holding at least ``DEFAULT_MIN_NUM_PARAMS`` parameters not already in a
smaller unit is a unit of its own."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from torch import nn

from trainkit.errors import ConfigError, MisconfigurationError

T = TypeVar("T")

DEFAULT_MIN_NUM_PARAMS = 1_000_000  # 4 MB in float32: each gather is big enough to be efficient
CONTAINERS = (nn.ModuleList, nn.ModuleDict)  # they have no forward, so FSDP cannot gather them

UnitClass = str | type[nn.Module]  # a class name (exact), or a class (and its subclasses)


def unit_classes(policy: object) -> list[UnitClass]:
    """``auto_wrap_policy`` as a list of class names and classes, or a ConfigError."""
    if policy is None:
        return []
    if isinstance(policy, list | tuple | set | frozenset) and all(map(_is_unit_class, policy)):
        return list(policy)
    raise ConfigError(
        "fsdp auto_wrap_policy",
        policy,
        "module class names or classes, e.g. ['Linear', 'Block'] or {nn.Linear}",
        "a size rule is min_num_params (a callable policy is FSDP1's, not supported)",
    )


def _is_unit_class(entry: object) -> bool:
    """Whether ``entry`` names a module class (a string) or is one."""
    return isinstance(entry, str) or (isinstance(entry, type) and issubclass(entry, nn.Module))


def matches(module: nn.Module, classes: Sequence[UnitClass]) -> bool:
    """Whether ``module`` is of a class in ``classes``: its exact class name, or a class."""
    return any(
        type(module).__name__ == entry if isinstance(entry, str) else isinstance(module, entry)
        for entry in classes
    )


def default_min_num_params(class_names: Sequence[UnitClass]) -> int:
    """The size rule when none is configured: units by size unless classes are named."""
    return 0 if class_names else DEFAULT_MIN_NUM_PARAMS


def shard_units(
    module: nn.Module, class_names: Sequence[UnitClass], min_num_params: int
) -> list[nn.Module]:
    """The submodules of ``module`` (never itself) to shard as units, children before parents:
    every module of a class in ``class_names`` (a name, or a class), and, when ``min_num_params`` > 0, every
    module whose parameters not yet in a smaller unit number at least that many, unless it is a
    container without forward or registers a parameter that a module outside it also registers
    (tied weights stay in a unit holding both users)."""
    units: list[nn.Module] = []
    claimed: set[int] = set()  # ids of the parameters already in a unit
    owners = parameter_owners(module)
    for sub in reversed(list(module.modules())):  # every module after all of its descendants
        if sub is module:
            continue
        pending = {id(p): p for p in sub.parameters() if id(p) not in claimed}
        by_name = matches(sub, class_names)
        if not by_name and not _large_and_self_contained(sub, pending, owners, min_num_params):
            continue
        units.append(sub)
        claimed.update(pending)
    return units


def parameter_owners(module: nn.Module) -> dict[int, set[int]]:
    """For each parameter (by id), the ids of the modules under ``module`` that register it."""
    owners: dict[int, set[int]] = {}
    for sub in module.modules():
        for _, param in sub.named_parameters(recurse=False, remove_duplicate=False):
            owners.setdefault(id(param), set()).add(id(sub))
    return owners


def _large_and_self_contained(
    sub: nn.Module,
    pending: dict[int, nn.Parameter],
    owners: dict[int, set[int]],
    min_num_params: int,
) -> bool:
    """Whether ``sub`` is a unit by size: enough pending parameters, used only inside it."""
    if min_num_params <= 0 or isinstance(sub, CONTAINERS):
        return False
    if sum(p.numel() for p in pending.values()) < min_num_params:
        return False
    inside = {id(m) for m in sub.modules()}
    return all(owners[key] <= inside for key in pending)


def describe_units(module: nn.Module, units: Sequence[nn.Module]) -> str:
    """The units by their names in ``module``, e.g. ``layers.0 (Linear, 4,196,352 parameters)``."""
    chosen = {id(unit) for unit in units}
    return ", ".join(
        f"{name} ({type(sub).__name__}, {sum(p.numel() for p in sub.parameters()):,} parameters)"
        for name, sub in module.named_modules()
        if id(sub) in chosen
    )


def call_explaining_units(call: Callable[..., T], units: str, *args: object) -> T:
    """``call(*args)``; torch's error for a unit's parameter used outside that unit's forward
    (still sharded there) becomes one that names the units and the fixes."""
    try:
        return call(*args)
    except RuntimeError as error:
        if not units or "mixed torch.Tensor and DTensor" not in str(error):
            raise
        raise MisconfigurationError(
            "fsdp: a parameter of a shard unit was used outside that module's forward (e.g. "
            "`x @ self.embed.weight.T`), where it is still sharded; the units here: "
            f"{units}; call the module instead of using its parameter, list the classes to "
            "shard in auto_wrap_policy (it replaces the size rule), or set min_num_params=0 "
            "(one unit: the whole model, gathered whole each step, as in Lightning)"
        ) from error
