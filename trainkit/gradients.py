"""Which parameters get gradients, and clipping them: the helpers behind TrainModule's
``toggle_optimizer`` / ``untoggle_optimizer`` and ``clip_gradients`` (manual optimization)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from torch import nn


class ParameterToggle:
    """The ``requires_grad`` flags a module had before ``toggle``, given back by ``restore``."""

    def __init__(self) -> None:
        self.saved: dict[nn.Parameter, bool] = {}

    def toggle(self, parameters: Iterable[nn.Parameter], optimizer: torch.optim.Optimizer) -> None:
        """Only ``optimizer``'s parameters among ``parameters`` keep getting gradients."""
        own = {id(p) for group in _param_groups(optimizer) for p in group["params"]}
        for param in parameters:
            if param not in self.saved:
                self.saved[param] = param.requires_grad
            if id(param) not in own:
                param.requires_grad = False

    def restore(self) -> None:
        """Give back every saved ``requires_grad``."""
        for param, required in self.saved.items():
            param.requires_grad = required
        self.saved = {}


def clip_gradients(
    optimizer: torch.optim.Optimizer,
    gradient_clip_val: float | None,
    gradient_clip_algorithm: str | None,
) -> None:
    """Clip the gradients of ``optimizer``'s parameters by 'norm' (default) or 'value'. An
    optimizer that shards its parameters over the ranks and clips their global norm itself
    (fairscale's OSS: each rank holds only its shard's reduced gradients) clips the norm."""
    if not gradient_clip_val:
        return
    params = [p for group in _param_groups(optimizer) for p in group["params"]]
    if gradient_clip_algorithm in (None, "norm"):
        own_norm_clip = getattr(optimizer, "clip_grad_norm", None)
        if callable(own_norm_clip):
            own_norm_clip(gradient_clip_val)
        else:
            torch.nn.utils.clip_grad_norm_(params, gradient_clip_val)
    elif gradient_clip_algorithm == "value":
        torch.nn.utils.clip_grad_value_(params, gradient_clip_val)
    else:
        from trainkit.errors import ConfigError

        raise ConfigError("gradient_clip_algorithm", gradient_clip_algorithm, "'norm' or 'value'")


def _param_groups(optimizer: torch.optim.Optimizer) -> list[dict[str, Any]]:
    """The parameter groups of a torch optimizer, or of the optimizer a wrapper holds."""
    inner = getattr(optimizer, "optimizer", optimizer)
    return inner.param_groups
