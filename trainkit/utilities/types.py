"""Lightning's ``utilities.types``: the aliases for annotating a module (``STEP_OUTPUT``,
``OptimizerLRScheduler``...), defined in ``trainkit/common/types.py``, and ``LRSchedulerConfig``
(trainkit's ``SchedulerConfig``)."""

from __future__ import annotations

from trainkit.common import types
from trainkit.common.types import *  # noqa: F403
from trainkit.optim import SchedulerConfig as LRSchedulerConfig

__all__ = ["LRSchedulerConfig"]
__all__ += types.__all__
