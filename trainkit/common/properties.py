"""``TypedProperty``: a ``property`` built from functions (one call per read, as a
``@property``'s) that a type checker reads as the value its getter returns; the Trainer's
read-outs and the module's values from its Trainer are made with it."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, Never, Self, TypeVar, overload

T = TypeVar("T")


class TypedProperty(property, Generic[T]):
    """``property(fget, fset, doc=doc)``, typed: reading gives ``T``; it can be set only where a
    subclass declares a ``__set__`` (and passes ``fset``)."""

    def __init__(
        self,
        fget: Callable[[Any], T],
        fset: Callable[[Any, T], None] | None = None,
        doc: str | None = None,
    ) -> None:
        super().__init__(fget, fset)
        self.__doc__ = doc  # a subclass's own: property.__init__ leaves it to the class docstring

    if TYPE_CHECKING:  # what a type checker sees: the value ``fget`` returns, never settable

        @overload
        def __get__(self, instance: None, owner: type | None = None, /) -> Self: ...
        @overload
        def __get__(self, instance: object, owner: type | None = None, /) -> T: ...
        def __get__(self, instance: object, owner: type | None = None, /) -> Any: ...
        def __set__(self, instance: object, value: Never, /) -> None: ...
