"""A ``torch.compile``'d module and its original: trainkit trains the original module with its
forward compiled, so ``from_compiled`` makes that module, ``to_uncompiled`` undoes it."""

from __future__ import annotations

from torch import nn

from trainkit.compiling import compile_forward, restore_forward, uncompiled


def from_compiled(model: nn.Module) -> nn.Module:
    """The module ``torch.compile(module)`` was made from, with its forward compiled by the
    same compiler (backend and mode kept)."""
    original, compiler = uncompiled(model)
    if compiler is None:
        raise ValueError(
            f"from_compiled: {type(model).__name__} is not made by torch.compile; pass "
            "torch.compile(module) (or give the module to the Trainer as it is)"
        )
    compile_forward(original, compiler)
    return original


def to_uncompiled(model: nn.Module) -> nn.Module:
    """The module without compilation: the original of a ``torch.compile``'d module, or a
    module from ``from_compiled`` with its own forward back."""
    original, _ = uncompiled(model)
    restore_forward(original)
    return original
