"""Finding a hyperparameter wherever a program keeps it (``lightning_getattr``: the module,
its ``hparams``, the datamodule and its ``hparams``), and whether a value pickles
(``clean_namespace`` drops those that do not)."""

from __future__ import annotations

import pickle
from typing import Any

from trainkit.hparams import AttributeDict

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


def _holders(model: object, attribute: str) -> list[Any]:
    """Everything that holds ``attribute``, in this order: the module, its hparams, the
    Trainer's datamodule, its hparams."""
    try:
        trainer = getattr(model, "trainer", None)
    except RuntimeError:  # not attached to a Trainer yet
        trainer = None
    datamodule = getattr(trainer, "datamodule", None)
    holders: list[Any] = []
    for owner in (model, datamodule):
        if owner is None:
            continue
        if hasattr(owner, attribute):
            holders.append(owner)
        hparams = getattr(owner, "hparams", None)
        if isinstance(hparams, dict) and attribute in hparams:
            holders.append(hparams)
    return holders


def _missing(model: object, attribute: str) -> AttributeError:
    return AttributeError(
        f"{attribute!r} is not an attribute of {type(model).__name__}, its hparams, the "
        "datamodule or the datamodule's hparams; set it in __init__ (self.hparams or an attribute)"
    )


def lightning_hasattr(model: object, attribute: str) -> bool:
    """Whether ``attribute`` is on the module, in its hparams or on the datamodule."""
    return bool(_holders(model, attribute))


def lightning_getattr(model: object, attribute: str) -> Any:
    """The value of ``attribute`` from the last of its holders (the datamodule before the module)."""
    holders = _holders(model, attribute)
    if not holders:
        raise _missing(model, attribute)
    holder = holders[-1]
    return holder[attribute] if isinstance(holder, dict) else getattr(holder, attribute)


def lightning_setattr(model: object, attribute: str, value: object) -> None:
    """Set ``attribute`` to ``value`` in every place that holds it."""
    holders = _holders(model, attribute)
    if not holders:
        raise _missing(model, attribute)
    for holder in holders:
        if isinstance(holder, dict):
            holder[attribute] = value
        else:
            setattr(holder, attribute, value)
