"""Lightning's ``plugins.precision``: ``Precision`` is the class of
``trainer.precision_plugin`` (autocast and the fp16 GradScaler for ``Trainer(precision=...)``)."""

from __future__ import annotations

from trainkit.strategies.precision import Precision

__all__ = ["Precision"]
