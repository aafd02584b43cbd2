"""Read what ``configure_optimizers`` returned into optimizers + scheduler configs."""

from __future__ import annotations

import warnings
from dataclasses import dataclass, fields
from typing import Any

import torch

from trainkit.errors import MisconfigurationError

FORMS = (
    "an optimizer, a list of optimizers, ([optimizers], [schedulers]), or a dict "
    "{'optimizer': ..., 'lr_scheduler': scheduler or {'scheduler': ..., 'interval': 'epoch'|'step', "
    "'frequency': int, 'monitor': str}} (or a list of such dicts)"
)


@dataclass
class SchedulerConfig:
    """A scheduler and when it steps (Lightning's ``LRSchedulerConfig``); ``strict=False``: a
    monitored metric that was not logged skips the step with a warning instead of an error."""

    scheduler: Any
    interval: str = "epoch"
    frequency: int = 1
    monitor: str | None = None
    name: str | None = None
    strict: bool = True

    @property
    def needs_metric(self) -> bool:
        return isinstance(self.scheduler, torch.optim.lr_scheduler.ReduceLROnPlateau)

    @property
    def reduce_on_plateau(self) -> bool:
        """Lightning's name for ``needs_metric``."""
        return self.needs_metric


def parse_optimizers(
    returned: object, manual: bool = False
) -> tuple[list[torch.optim.Optimizer], list[SchedulerConfig]]:
    """Accept every documented return form; raise one clear error for anything else.
    ``manual``: the module optimizes manually, so it steps its schedulers itself and the keys
    that say how the loop would step them are ignored, with Lightning's warning."""
    if isinstance(returned, torch.optim.Optimizer):
        return [returned], []
    if isinstance(returned, dict):
        return _from_dicts([returned], manual)
    if isinstance(returned, list | tuple):
        if len(returned) == 2 and all(isinstance(x, list | tuple) for x in returned):
            optimizers = _check_optimizers(list(returned[0]))
            schedulers = [_scheduler_config(s, manual) for s in returned[1]]
            return optimizers, _require_monitors(schedulers, manual)
        if returned and all(isinstance(x, dict) for x in returned):
            return _from_dicts(list(returned), manual)
        if returned and all(isinstance(x, torch.optim.Optimizer) for x in returned):
            return list(returned), []
    raise MisconfigurationError(
        f"configure_optimizers returned {_describe(returned)}; expected {FORMS}"
    )


OPTIMIZER_KEYS = ("optimizer", "lr_scheduler", "monitor")
# what only the loop's own stepping reads: ignored under manual optimization (as Lightning)
LOOP_STEPPING_KEYS = ("reduce_on_plateau", "monitor", "strict")


def _from_dicts(
    dicts: list[dict[str, Any]], manual: bool = False
) -> tuple[list[torch.optim.Optimizer], list[SchedulerConfig]]:
    optimizers, schedulers = [], []
    for entry in dicts:
        if "optimizer" not in entry:
            raise MisconfigurationError(
                f"configure_optimizers returned a dict with keys {sorted(entry)}; expected "
                "'optimizer' and optionally 'lr_scheduler' and 'monitor'"
            )
        unknown = [key for key in entry if key not in OPTIMIZER_KEYS]
        if unknown:  # Lightning warns and goes on
            warnings.warn(
                f"configure_optimizers returned a dict with the keys {unknown}, which are ignored; "
                f"expected {list(OPTIMIZER_KEYS)}",
                RuntimeWarning,
                stacklevel=3,
            )
        optimizers.extend(_check_optimizers([entry["optimizer"]]))
        if entry.get("lr_scheduler") is not None:
            config = _scheduler_config(entry["lr_scheduler"], manual)
            if not manual and config.monitor is None and config.needs_metric:
                config.monitor = entry.get("monitor")  # as Lightning's: plateau only
            schedulers.append(config)
    return optimizers, _require_monitors(schedulers, manual)


def _require_monitors(schedulers: list[SchedulerConfig], manual: bool) -> list[SchedulerConfig]:
    """As Lightning: a ReduceLROnPlateau the loop steps needs the metric it reads."""
    for config in schedulers:
        if not manual and config.needs_metric and not config.monitor:
            raise MisconfigurationError(
                "ReduceLROnPlateau needs a metric: return {'optimizer': opt, 'lr_scheduler': "
                "{'scheduler': sched, 'monitor': 'val_loss'}}"
            )
    return schedulers


def _check_optimizers(items: list[Any]) -> list[torch.optim.Optimizer]:
    for item in items:
        if not isinstance(item, torch.optim.Optimizer):
            raise MisconfigurationError(
                f"configure_optimizers returned {_describe(item)} where an optimizer belongs; "
                f"expected {FORMS}"
            )
    return items


def _scheduler_config(item: object, manual: bool = False) -> SchedulerConfig:
    if isinstance(item, dict):
        if "scheduler" not in item:
            raise MisconfigurationError(
                f"lr_scheduler dict has keys {sorted(item)}; expected 'scheduler' "
                "(+ 'interval', 'frequency', 'monitor', 'name', 'strict')"
            )
        item = _known_scheduler_keys(item, manual)
        config = SchedulerConfig(
            item["scheduler"],
            item.get("interval", "epoch"),
            int(item.get("frequency", 1)),
            item.get("monitor"),
            item.get("name"),
            bool(item.get("strict", True)),
        )
    else:
        config = SchedulerConfig(item)
    if config.interval not in ("epoch", "step"):
        raise MisconfigurationError(
            f"lr_scheduler interval {config.interval!r}; expected 'epoch' or 'step'"
        )
    if not hasattr(config.scheduler, "step") or not hasattr(config.scheduler, "state_dict"):
        raise MisconfigurationError(
            f"lr_scheduler {_describe(config.scheduler)} is not a scheduler"
        )
    return config


def _known_scheduler_keys(item: dict[str, Any], manual: bool) -> dict[str, Any]:
    """The scheduler dict without the keys that do nothing here, each warned about as
    Lightning does (a RuntimeWarning, and the run goes on)."""
    known = {field.name for field in fields(SchedulerConfig)} | {"reduce_on_plateau"}
    unknown = [key for key in item if key not in known]
    if unknown:
        warnings.warn(
            f"the lr_scheduler dict has the keys {unknown}, which are ignored; expected "
            f"{sorted(known)}; remove them from what configure_optimizers returns",
            RuntimeWarning,
            stacklevel=4,
        )
    ignored = [key for key in item if manual and key in LOOP_STEPPING_KEYS]
    if ignored:
        warnings.warn(
            f"the lr_scheduler dict has the keys {ignored}, which manual optimization ignores: "
            "call lr_scheduler.step() in training_step (or an epoch-end hook)",
            RuntimeWarning,
            stacklevel=4,
        )
    return {key: value for key, value in item.items() if key in known and key not in ignored}


def _describe(value: object) -> str:
    text = repr(value)
    return (
        f"{type(value).__name__} {text[:60]}"
        if len(text) > 60
        else f"{type(value).__name__} {text}"
    )
