"""LambdaCallback: a callback made of functions, one per hook: ``LambdaCallback(on_fit_start=
lambda trainer, pl_module: print("start"))``."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from trainkit.callbacks.base import Callback

Hook = Callable[..., Any]

HOOKS = (
    "setup",
    "teardown",
    "on_fit_start",
    "on_fit_end",
    "on_sanity_check_start",
    "on_sanity_check_end",
    "on_train_batch_start",
    "on_train_batch_end",
    "on_train_epoch_start",
    "on_train_epoch_end",
    "on_validation_epoch_start",
    "on_validation_epoch_end",
    "on_test_epoch_start",
    "on_test_epoch_end",
    "on_validation_batch_start",
    "on_validation_batch_end",
    "on_test_batch_start",
    "on_test_batch_end",
    "on_train_start",
    "on_train_end",
    "on_validation_start",
    "on_validation_end",
    "on_test_start",
    "on_test_end",
    "on_exception",
    "on_save_checkpoint",
    "on_load_checkpoint",
    "on_before_backward",
    "on_after_backward",
    "on_before_optimizer_step",
    "on_before_zero_grad",
    "on_predict_start",
    "on_predict_end",
    "on_predict_batch_start",
    "on_predict_batch_end",
    "on_predict_epoch_start",
    "on_predict_epoch_end",
)


class LambdaCallback(Callback):
    """Call the function given for a hook with the hook's arguments (``trainer, pl_module, ...``)."""

    def __init__(
        self,
        setup: Hook | None = None,
        teardown: Hook | None = None,
        on_fit_start: Hook | None = None,
        on_fit_end: Hook | None = None,
        on_sanity_check_start: Hook | None = None,
        on_sanity_check_end: Hook | None = None,
        on_train_batch_start: Hook | None = None,
        on_train_batch_end: Hook | None = None,
        on_train_epoch_start: Hook | None = None,
        on_train_epoch_end: Hook | None = None,
        on_validation_epoch_start: Hook | None = None,
        on_validation_epoch_end: Hook | None = None,
        on_test_epoch_start: Hook | None = None,
        on_test_epoch_end: Hook | None = None,
        on_validation_batch_start: Hook | None = None,
        on_validation_batch_end: Hook | None = None,
        on_test_batch_start: Hook | None = None,
        on_test_batch_end: Hook | None = None,
        on_train_start: Hook | None = None,
        on_train_end: Hook | None = None,
        on_validation_start: Hook | None = None,
        on_validation_end: Hook | None = None,
        on_test_start: Hook | None = None,
        on_test_end: Hook | None = None,
        on_exception: Hook | None = None,
        on_save_checkpoint: Hook | None = None,
        on_load_checkpoint: Hook | None = None,
        on_before_backward: Hook | None = None,
        on_after_backward: Hook | None = None,
        on_before_optimizer_step: Hook | None = None,
        on_before_zero_grad: Hook | None = None,
        on_predict_start: Hook | None = None,
        on_predict_end: Hook | None = None,
        on_predict_batch_start: Hook | None = None,
        on_predict_batch_end: Hook | None = None,
        on_predict_epoch_start: Hook | None = None,
        on_predict_epoch_end: Hook | None = None,
    ) -> None:
        given = {name: value for name, value in locals().items() if name in HOOKS}
        self.hooks: dict[str, Hook] = {name: fn for name, fn in given.items() if fn is not None}
        for name, fn in self.hooks.items():
            if not callable(fn):
                raise TypeError(
                    f"LambdaCallback {name}={fn!r}; expected a function of the hook's "
                    "arguments, e.g. lambda trainer, pl_module: ..."
                )


def _forward(name: str) -> Hook:
    def hook(self: LambdaCallback, *args: Any, **kwargs: Any) -> None:
        fn = self.hooks.get(name)
        if fn is not None:
            fn(*args, **kwargs)

    hook.__name__ = hook.__qualname__ = name
    hook.__doc__ = f"Call the function given as ``{name}``."
    return hook


for _name in HOOKS:  # every hook is defined, and forwards only when a function was given
    setattr(LambdaCallback, _name, _forward(_name))
