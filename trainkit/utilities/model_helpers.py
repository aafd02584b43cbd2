"""``is_overridden``: whether a subclass defines a hook of its own."""

from __future__ import annotations

from typing import Any

from trainkit.common.hooks import overrides


def is_overridden(
    method_name: str, instance: object | None = None, parent: type | None = None
) -> bool:
    """Whether ``instance``'s class defines ``method_name`` differently from ``parent`` (by
    default trainkit's TrainModule, DataModule or Callback, whichever ``instance`` is)."""
    if instance is None:
        return False
    if parent is None:
        parent = _default_parent(instance)
    if not hasattr(instance, method_name):
        return False
    if not hasattr(parent, method_name):
        raise ValueError(
            f"is_overridden: {parent.__name__} has no method {method_name!r}; give the parent "
            "class that defines it"
        )
    return overrides(instance, parent, method_name)


def _default_parent(instance: object) -> type[Any]:
    from trainkit.callbacks.base import Callback
    from trainkit.datamodule import DataModule
    from trainkit.module import TrainModule

    for parent in (TrainModule, DataModule, Callback):
        if isinstance(instance, parent):
            return parent
    raise ValueError(
        f"is_overridden: {type(instance).__name__} is not a TrainModule, DataModule or "
        "Callback; give parent="
    )


def get_torchvision_model(model_name: str, **kwargs: Any) -> Any:
    """``torchvision.models.get_model(model_name, **kwargs)`` (``pip install torchvision``)."""
    try:
        from torchvision import models  # pyright: ignore[reportMissingImports]
    except ImportError:
        raise ModuleNotFoundError(
            f"get_torchvision_model({model_name!r}) needs torchvision: pip install torchvision"
        ) from None
    return models.get_model(model_name, **kwargs)
