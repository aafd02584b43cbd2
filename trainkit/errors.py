"""Errors trainkit raises for bad user input: one line, exit code 2 from the CLI."""

from __future__ import annotations


class ConfigError(ValueError):
    """A bad value in the user's configuration, reported as one line without a traceback."""

    def __init__(self, what: str, value: object, expected: str, fix: str = "") -> None:
        message = f"{what} {value!r}; expected {expected}"
        if fix:
            message += f"; {fix}"
        super().__init__(message)


class MisconfigurationError(ValueError):
    """User code that cannot work as written (missing hooks, junk from configure_optimizers)."""


class NonFiniteLossError(RuntimeError):
    """The loss was NaN or infinite; the fit stopped before that batch changed the weights."""


def no_optimizer(name: str) -> str:
    """The one line for a module that trains without saying how to optimize."""
    return (
        f"{name} defines no configure_optimizers and the config has no optimizer section; "
        f"expected one of them; add configure_optimizers to {name} (return "
        "torch.optim.Adam(self.parameters(), lr=1e-3)), or an optimizer section "
        "(optimizer: {class_path: torch.optim.Adam, init_args: {lr: 0.001}})"
    )
