"""torch.compile for a TrainModule: a module the user compiled is unwrapped, or the Trainer's
``compile`` setting asks for it; the module's ``forward`` is compiled in place, in each rank,
so checkpoints keep the module's own parameter names (no ``_orig_mod.`` prefix)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from torch import nn

from trainkit.errors import ConfigError

MODES = ("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")


def compile_options(setting: bool | str | dict[str, Any] | None) -> dict[str, Any] | None:
    """The Trainer's ``compile`` setting as torch.compile's keyword arguments (None: off)."""
    if setting in (None, False):
        return None
    if setting is True:
        return {}
    if isinstance(setting, str) and setting in MODES:
        return {"mode": setting}
    if isinstance(setting, dict):
        return dict(setting)
    raise ConfigError(
        "trainer.compile",
        setting,
        f"true, false, a mode ({', '.join(MODES)}) or torch.compile arguments as a mapping",
    )


def uncompiled(model: nn.Module | None) -> tuple[Any, Any]:
    """``(module, compiler)``: a torch.compile'd module's original module and the compiler it
    was made with (its backend and mode kept), or the model as it is and None."""
    original = getattr(model, "_orig_mod", None)  # how torch's OptimizedModule names it
    if isinstance(original, nn.Module) and model is not None:
        return original, model.dynamo_ctx
    return model, None


def compile_forward(module: nn.Module, how: dict[str, Any] | Callable[[Any], Any]) -> None:
    """Compile ``module.forward`` in place with torch.compile's arguments ``how`` or a user's
    compiler; recompilations are logged with their reason."""
    import torch

    # torch's documented switch for TORCH_LOGS; torch._logging re-exports it without an
    # __all__, so its stubs call it private
    from torch._logging import set_logs  # pyright: ignore[reportPrivateImportUsage]

    set_logs(recompiles=True)
    compiler = how if callable(how) else functools.partial(torch.compile, **how)
    module.forward = compiler(module.forward)


def restore_forward(module: nn.Module) -> None:
    """Undo ``compile_forward``: the class's own forward again."""
    vars(module).pop("forward", None)
