"""``grad_norm``: the norm of each parameter's gradient and of all of them, ready for
``self.log_dict`` (typically in ``on_before_optimizer_step``)."""

from __future__ import annotations

import torch
from torch import nn


def grad_norm(
    module: nn.Module, norm_type: float | int | str, group_separator: str = "/"
) -> dict[str, torch.Tensor]:
    """``{"grad_2.0_norm/<param>": norm, ..., "grad_2.0_norm_total": norm of the norms}`` over
    the parameters that have a gradient; ``norm_type``: a p > 0 or ``'inf'``."""
    norm_type = float(norm_type)
    if norm_type <= 0:
        raise ValueError(f"grad_norm: norm_type {norm_type!r}; expected a positive float or 'inf'")
    norms = {
        f"grad_{norm_type}_norm{group_separator}{name}": param.grad.data.norm(norm_type)
        for name, param in module.named_parameters()
        if param.grad is not None
    }
    if norms:
        total = torch.tensor(list(norms.values())).norm(norm_type)
        norms[f"grad_{norm_type}_norm_total"] = total
    return norms
