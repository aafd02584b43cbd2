"""Lightning's ``load_from_checkpoint`` of a module or data module: build the object from the
hyperparameters a checkpoint saved (or a YAML file), updated by the caller's, ready for its
state; and the classmethod that refuses a call through an instance."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from torch.serialization import MAP_LOCATION

T = TypeVar("T")


class RestrictedClassmethod(classmethod):
    """A classmethod that refuses to run through an instance: ``model.load_from_checkpoint(path)``
    returns a new object and leaves ``model`` as it was, so it is a TypeError (as in Lightning)."""

    def __get__(self, instance: object, owner: type | None = None) -> Callable[..., Any]:
        function = self.__func__
        cls = owner if owner is not None else type(instance)

        @functools.wraps(function)
        def bound(*args: Any, **kwargs: Any) -> Any:
            if instance is not None:
                raise TypeError(
                    f"{cls.__name__}.{function.__name__} was called on an instance; expected "
                    f"a call on the class: obj = {cls.__name__}.{function.__name__}(...) "
                    "(it returns a new object, it does not load into this one)"
                )
            return function(cls, *args, **kwargs)

        return bound


if TYPE_CHECKING:  # type checkers see a classmethod; the refusal happens at run time
    restricted_classmethod = classmethod
else:
    restricted_classmethod = RestrictedClassmethod


def build_from_checkpoint(
    cls: Callable[..., T],
    checkpoint_path: str,
    hparams_key: str,
    map_location: MAP_LOCATION,
    hparams_file: str | None,
    weights_only: bool | None,
    overrides: dict[str, Any],
) -> tuple[T, dict[str, Any]]:
    """``cls`` built from the checkpoint's hyperparameters under ``hparams_key`` (or those of
    ``hparams_file``) updated by ``overrides``, and the loaded checkpoint."""
    from trainkit.checkpoint.files import load_checkpoint

    checkpoint = load_checkpoint(
        checkpoint_path,
        map_location="cpu" if map_location is None else map_location,
        weights_only=True if weights_only is None else weights_only,
    )
    if not isinstance(checkpoint, dict):
        checkpoint = {}
    saved = checkpoint.get(hparams_key, {})
    if hparams_file is not None:
        import yaml

        with open(hparams_file) as file:
            saved = yaml.safe_load(file) or {}
    return cls(**{**saved, **overrides}), checkpoint
