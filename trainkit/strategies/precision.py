"""Numeric precision: full 32-bit, or autocast with fp16 (+ GradScaler) / bf16."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import torch

from trainkit.errors import ConfigError

PRECISIONS = {
    "32": "32",
    "32-true": "32",
    "16-mixed": "16-mixed",
    "16": "16-mixed",
    "bf16-mixed": "bf16-mixed",
    "bf16": "bf16-mixed",
}
ACCEPTED = "'32', '16-mixed' or 'bf16-mixed'"


def normalize_precision(value: object) -> str:
    """Map the accepted spellings (32, '32-true', 16, 'bf16', ...) to one canonical name; None
    (Lightning's default, ``precision: null`` in YAML) is the default, '32'."""
    if value is None:
        return "32"
    key = str(value).strip().lower()
    if key not in PRECISIONS:
        raise ConfigError("trainer.precision", value, ACCEPTED)
    return PRECISIONS[key]


class Precision:
    """Owns autocast and, for fp16, the GradScaler; the loops call it around forward/backward."""

    def __init__(
        self,
        precision: str,
        device_type: str,
        scaler: torch.amp.GradScaler | None = None,
        scales_loss: bool = True,
    ) -> None:
        """``scaler``: the fp16 gradient scaler a strategy needs (default: torch's GradScaler);
        ``scales_loss=False``: none, the strategy's engine scales the fp16 loss (deepspeed)."""
        self.precision = normalize_precision(precision)
        self.device_type = device_type
        if self.precision == "16-mixed" and device_type != "cuda":
            raise ConfigError(
                "trainer.precision",
                precision,
                "'bf16-mixed' or '32' on CPU",
                "16-mixed needs a GPU; use precision: bf16-mixed on CPU",
            )
        self.scaler = None
        if self.precision == "16-mixed" and scales_loss:
            self.scaler = scaler if scaler is not None else torch.amp.GradScaler("cuda")
        self.autocast_dtype = {"16-mixed": torch.float16, "bf16-mixed": torch.bfloat16}.get(
            self.precision
        )

    @property
    def is_mixed(self) -> bool:
        return self.autocast_dtype is not None

    def autocast(self) -> contextlib.AbstractContextManager:
        """The context the forward pass runs in (a no-op at 32-bit)."""
        if self.autocast_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device_type, dtype=self.autocast_dtype)

    def backward(self, loss: torch.Tensor, *args: Any, **kwargs: Any) -> None:
        """``loss.backward(*args, **kwargs)``, on the fp16-scaled loss under 16-mixed."""
        self.scale(loss).backward(*args, **kwargs)

    def scale(self, loss: torch.Tensor) -> torch.Tensor:
        """``loss`` as backward should see it (multiplied by the fp16 loss scale)."""
        return self.scaler.scale(loss) if self.scaler is not None else loss

    def unscale(self, optimizer: torch.optim.Optimizer) -> None:
        """Bring gradients back to their true scale before clipping or inspection."""
        if self.scaler is not None:
            self.scaler.unscale_(optimizer)

    def step(
        self, optimizer: torch.optim.Optimizer, closure: Callable[[], float] | None = None
    ) -> Any:
        if self.scaler is None:
            return optimizer.step(closure) if closure is not None else optimizer.step()
        result = self.scaler.step(optimizer)
        return result

    def update(self) -> None:
        if self.scaler is not None:
            self.scaler.update()

    def state_dict(self) -> dict[str, Any]:
        return self.scaler.state_dict() if self.scaler is not None else {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if self.scaler is not None and state:
            self.scaler.load_state_dict(state)
