"""Where a tuned value lives: the attribute named ``lr`` or ``batch_size`` looked up, read and
written in the model, ``model.hparams``, the stage's datamodule and ``datamodule.hparams``, in
that order (Lightning's lookup for its tuners)."""

from __future__ import annotations

from collections.abc import MutableMapping


def attribute_holders(model: object, name: str, datamodule: object = None) -> list[object]:
    """Every object (or hparams mapping) among the model, its hparams, the stage's datamodule and
    its hparams that holds ``name``, in that order."""
    holders: list[object] = []
    if hasattr(model, name):
        holders.append(model)
    hparams = getattr(model, "hparams", None)
    if isinstance(hparams, MutableMapping) and name in hparams:
        holders.append(hparams)
    if datamodule is not None:
        if hasattr(datamodule, name):
            holders.append(datamodule)
        data_hparams = getattr(datamodule, "hparams", None)
        if isinstance(data_hparams, MutableMapping) and name in data_hparams:
            holders.append(data_hparams)
    return holders


def has_attribute(model: object, name: str, datamodule: object = None) -> bool:
    """Whether the model, its hparams, its datamodule or the datamodule's hparams hold ``name``."""
    return bool(attribute_holders(model, name, datamodule))


def get_attribute(model: object, name: str, datamodule: object = None) -> object:
    """The value of ``name`` in its last holder (the datamodule's before the model's)."""
    holders = attribute_holders(model, name, datamodule)
    if not holders:
        raise AttributeError(missing(name))
    holder = holders[-1]
    return holder[name] if isinstance(holder, MutableMapping) else getattr(holder, name)


def set_attribute(model: object, name: str, value: object, datamodule: object = None) -> None:
    """Write ``value`` to ``name`` in every holder of it."""
    holders = attribute_holders(model, name, datamodule)
    if not holders:
        raise AttributeError(missing(name))
    for holder in holders:
        if isinstance(holder, MutableMapping):
            holder[name] = value
        else:
            setattr(holder, name, value)


def missing(name: str) -> str:
    return (
        f"{name} is neither stored in the model namespace nor the `hparams` namespace/dict, nor "
        f"the datamodule; give the model or datamodule a `{name}` attribute (or hyperparameter)"
    )
