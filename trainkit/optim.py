"""Read what ``configure_optimizers`` returned into optimizers + scheduler configs."""

from __future__ import annotations

from dataclasses import dataclass
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


def parse_optimizers(returned: object) -> tuple[list[torch.optim.Optimizer], list[SchedulerConfig]]:
    """Accept every documented return form; raise one clear error for anything else."""
    if isinstance(returned, torch.optim.Optimizer):
        return [returned], []
    if isinstance(returned, dict):
        return _from_dicts([returned])
    if isinstance(returned, list | tuple):
        if len(returned) == 2 and all(isinstance(x, list | tuple) for x in returned):
            optimizers = _check_optimizers(list(returned[0]))
            return optimizers, [_scheduler_config(s) for s in returned[1]]
        if returned and all(isinstance(x, dict) for x in returned):
            return _from_dicts(list(returned))
        if returned and all(isinstance(x, torch.optim.Optimizer) for x in returned):
            return list(returned), []
    raise MisconfigurationError(
        f"configure_optimizers returned {_describe(returned)}; expected {FORMS}"
    )


def _from_dicts(
    dicts: list[dict[str, Any]],
) -> tuple[list[torch.optim.Optimizer], list[SchedulerConfig]]:
    optimizers, schedulers = [], []
    for entry in dicts:
        unknown = set(entry) - {"optimizer", "lr_scheduler", "monitor"}
        if "optimizer" not in entry or unknown:
            raise MisconfigurationError(
                f"configure_optimizers returned a dict with keys {sorted(entry)}; expected 'optimizer' "
                "and optionally 'lr_scheduler' and 'monitor'"
            )
        optimizers.extend(_check_optimizers([entry["optimizer"]]))
        if entry.get("lr_scheduler") is not None:
            config = _scheduler_config(entry["lr_scheduler"])
            if config.monitor is None:
                config.monitor = entry.get("monitor")
            schedulers.append(config)
    for config in schedulers:
        if config.needs_metric and not config.monitor:
            raise MisconfigurationError(
                "ReduceLROnPlateau needs a metric: return {'optimizer': opt, 'lr_scheduler': "
                "{'scheduler': sched, 'monitor': 'val_loss'}}"
            )
    return optimizers, schedulers


def _check_optimizers(items: list[Any]) -> list[torch.optim.Optimizer]:
    for item in items:
        if not isinstance(item, torch.optim.Optimizer):
            raise MisconfigurationError(
                f"configure_optimizers returned {_describe(item)} where an optimizer belongs; "
                f"expected {FORMS}"
            )
    return items


def _scheduler_config(item: object) -> SchedulerConfig:
    if isinstance(item, dict):
        if "scheduler" not in item:
            raise MisconfigurationError(
                f"lr_scheduler dict has keys {sorted(item)}; expected 'scheduler' "
                "(+ 'interval', 'frequency', 'monitor', 'name', 'strict')"
            )
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


def _describe(value: object) -> str:
    text = repr(value)
    return (
        f"{type(value).__name__} {text[:60]}"
        if len(text) > 60
        else f"{type(value).__name__} {text}"
    )
