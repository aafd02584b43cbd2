"""``HyperparametersMixin``: ``save_hyperparameters`` and ``hparams`` for any class of the
user's (TrainModule and DataModule have them already)."""

from __future__ import annotations

import copy
import inspect
from types import FrameType
from typing import Any

from trainkit.hparams import AttributeDict, collect_init_args, select_hparams


class HyperparametersMixin:
    """Give a class ``save_hyperparameters()`` (its ``__init__`` arguments into ``hparams``)."""

    _hparams: AttributeDict
    _hparams_initial: AttributeDict
    _log_hyperparams: bool

    def save_hyperparameters(
        self,
        *names: str | dict[str, Any],
        ignore: str | list[str] | None = None,
        frame: FrameType | None = None,
        logger: bool = True,
    ) -> None:
        """Store the ``__init__`` arguments (all, those ``names``, or one dict) in ``hparams``,
        less ``ignore``; ``logger=False`` keeps them from the loggers."""
        if frame is None:
            current = inspect.currentframe()
            frame = current.f_back if current else None
        init_args = collect_init_args(frame, self) if frame else {}
        self._hparams = AttributeDict(select_hparams(init_args, names, ignore))
        self._hparams_initial = copy.deepcopy(self._hparams)
        self._log_hyperparams = logger

    @property
    def hparams(self) -> AttributeDict:
        """The saved hyperparameters (empty before ``save_hyperparameters``)."""
        if not hasattr(self, "_hparams"):
            self._hparams = AttributeDict()
        return self._hparams

    @property
    def hparams_initial(self) -> AttributeDict:
        """A copy of the hyperparameters as saved (later changes to ``hparams`` not included)."""
        if not hasattr(self, "_hparams_initial"):
            return AttributeDict()
        return copy.deepcopy(self._hparams_initial)
