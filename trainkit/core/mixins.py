"""Lightning's ``core.mixins``: ``HyperparametersMixin``, ``save_hyperparameters`` and
``hparams`` for any class of the user's: the one TrainModule and DataModule inherit
(``trainkit/hparams.py``)."""

from __future__ import annotations

from trainkit.hparams import HyperparametersMixin

__all__ = ["HyperparametersMixin"]
