"""``measure_flops``: the floating-point operations of one forward (and backward) pass, counted
by ``torch.utils.flop_counter`` (a model on the meta device costs no memory or time)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn


def measure_flops(
    model: nn.Module,
    forward_fn: Callable[[], torch.Tensor],
    loss_fn: Callable[[torch.Tensor], torch.Tensor] | None = None,
) -> int:
    """FLOPs of ``forward_fn()`` (a call of ``model``), plus the backward of ``loss_fn(output)``
    when given; runs under ``torch.no_grad`` without a ``loss_fn``."""
    from torch.utils.flop_counter import FlopCounterMode

    counter = FlopCounterMode(display=False)
    with counter:
        if loss_fn is None:
            with torch.no_grad():
                forward_fn()
        else:
            loss_fn(forward_fn()).backward()
    return counter.get_total_flops()
