"""Finding a hyperparameter wherever a program keeps it (``lightning_getattr``: the module,
its ``hparams``, the datamodule and its ``hparams``), and whether a value pickles
(``clean_namespace`` drops those that do not)."""

from __future__ import annotations

import pickle
from typing import Any

from trainkit.hparams import AttributeDict
from trainkit.tuner.attributes import get_attribute, has_attribute, set_attribute

__all__ = [
    "AttributeDict",
    "clean_namespace",
    "is_picklable",
    "lightning_getattr",
    "lightning_hasattr",
    "lightning_setattr",
]


def is_picklable(obj: object) -> bool:
    """Whether ``pickle.dumps(obj)`` works."""
    try:
        pickle.dumps(obj)
    except (pickle.PickleError, AttributeError, RuntimeError, TypeError):
        return False
    return True


def clean_namespace(hparams: dict[str, Any]) -> None:
    """Remove the entries that do not pickle (a checkpoint could not hold them)."""
    for key in [key for key, value in hparams.items() if not is_picklable(value)]:
        del hparams[key]


def _datamodule(model: object) -> object:
    """The datamodule of the Trainer the module is attached to (None when it is not)."""
    try:
        trainer = getattr(model, "trainer", None)
    except RuntimeError:  # not attached to a Trainer yet
        trainer = None
    return getattr(trainer, "datamodule", None)


def lightning_hasattr(model: object, attribute: str) -> bool:
    """Whether ``attribute`` is on the module, in its hparams or on the datamodule."""
    return has_attribute(model, attribute, _datamodule(model))


def lightning_getattr(model: object, attribute: str) -> Any:
    """The value of ``attribute`` from the last of its holders (the datamodule before the module)."""
    return get_attribute(model, attribute, _datamodule(model))


def lightning_setattr(model: object, attribute: str, value: object) -> None:
    """Set ``attribute`` to ``value`` in every place that holds it."""
    set_attribute(model, attribute, value, _datamodule(model))
