"""Hook dispatch: the overridden hooks of callbacks, then of the module, bound once per loop."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from trainkit.callbacks.base import Callback
from trainkit.common.hooks import overrides
from trainkit.module import HooksMixin
from trainkit.state import RunState

if TYPE_CHECKING:
    from trainkit.trainer.trainer import Trainer


class HookDispatcher:
    """Calls hooks with the fixed arguments callbacks receive: ``(trainer, module, ...)``.

    ``trainer`` is the Trainer handed to callbacks; the dispatcher only passes it on. Hooks a
    callback or the module does not override are never bound or called.
    """

    def __init__(self, trainer: Trainer, state: RunState) -> None:
        self.trainer = trainer
        self.state = state

    def bound(self, name: str) -> list[Callable[..., Any]]:
        """The overridden ``name`` hooks of callbacks then module, ready to call."""
        state = self.state
        module = state.given.module
        hooks: list[Callable[..., Any]] = [
            functools.partial(getattr(cb, name), self.trainer, module)
            for cb in state.given.callbacks
            if overrides(cb, Callback, name)
        ]
        if overrides(module, HooksMixin, name):
            hooks.append(getattr(module, name))
        return [state.profiler.wrap(name, hook) for hook in hooks]

    def call(self, name: str, *args: object) -> None:
        """Call hook ``name`` on every callback and the module that override it."""
        for hook in self.bound(name):
            hook(*args)

    def call_callbacks(
        self, name: str, *args: object, only: list[Any] | None = None, **kwargs: object
    ) -> None:
        """Call ``name`` on every callback (or those in ``only``), whether overridden or not."""
        for callback in self.state.given.callbacks if only is None else only:
            getattr(callback, name)(self.trainer, self.state.given.module, *args, **kwargs)
