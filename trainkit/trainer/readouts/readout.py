"""``Readout``: a read-only Trainer read-out written in one line, a property whose getter is the
function given (one call per read, as a ``@property``'s), typed by what that function returns."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from trainkit.common.properties import TypedProperty

if TYPE_CHECKING:
    from trainkit.trainer.trainer import Trainer

T = TypeVar("T")


class Readout(TypedProperty[T]):
    """``name = Readout(lambda t: t.run_state.position.epoch, "doc")``: ``trainer.name`` returns
    what ``read(trainer)`` returns; it is a ``property`` (read-only) for every tool that looks."""

    def __init__(
        self,
        read: Callable[[Trainer], T],
        doc: str | None = None,
        write: Callable[[Trainer, T], None] | None = None,  # a settable subclass's setter
    ) -> None:
        super().__init__(read, write, doc)
