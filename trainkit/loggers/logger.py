"""What a custom logger is built from, at Lightning's path (``loggers.logger``): the ``Logger``
base, ``rank_zero_experiment`` for its ``experiment`` property, and the do-nothing
``DummyExperiment`` and ``DummyLogger``."""

from __future__ import annotations

import functools
import statistics
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

from trainkit.distributed.comm import rank_zero_only
from trainkit.loggers.base import Logger

__all__ = ["DummyExperiment", "DummyLogger", "Logger", "merge_dicts", "rank_zero_experiment"]

T = TypeVar("T")
L = TypeVar("L")  # the logger class whose getter is decorated


class DummyExperiment:
    """An experiment on which every method call does nothing (what ranks other than 0 get)."""

    def nop(self, *args: object, **kwargs: object) -> None:
        """Do nothing."""

    def __getattr__(self, _: str) -> Callable[..., None]:
        return self.nop

    def __getitem__(self, index: object) -> DummyExperiment:
        return self  # experiment[0].add_image(...)

    def __setitem__(self, *args: object) -> None:
        """Ignore the assignment."""


def rank_zero_experiment(fn: Callable[[L], T]) -> Callable[[L], T | DummyExperiment]:
    """Decorate a logger's ``experiment`` getter: the real experiment on global rank 0, a
    ``DummyExperiment`` elsewhere (so only rank 0 creates a run)."""

    @functools.wraps(fn)
    def experiment(self: L) -> T | DummyExperiment:
        if rank_zero_only.rank > 0:  # pyright: ignore[reportFunctionMemberAccess]
            return DummyExperiment()
        return fn(self)

    return experiment


class DummyLogger(Logger):
    """A logger that records nothing; any method called on it does nothing."""

    def __init__(self) -> None:
        super().__init__(name="", version="")
        self._experiment = DummyExperiment()

    @property
    def experiment(self) -> DummyExperiment:
        return self._experiment

    def log_metrics(self, metrics: dict[str, float], step: int) -> None:
        """Record nothing."""

    def log_hyperparams(self, params: dict[str, Any]) -> None:
        """Record nothing."""

    def __getitem__(self, index: object) -> DummyLogger:
        return self

    def __getattr__(self, name: str) -> Callable[..., None]:
        if name.startswith("__"):
            raise AttributeError(name)
        return self._experiment.nop


def merge_dicts(
    dicts: Sequence[Mapping[str, Any]],
    agg_key_funcs: Mapping[str, Any] | None = None,
    default_func: Callable[[Sequence[float]], float] = statistics.mean,
) -> dict[str, Any]:
    """One dict from several: each key's values (None left out) aggregated by its function in
    ``agg_key_funcs`` or ``default_func``; nested dicts merge the same way."""
    agg_key_funcs = agg_key_funcs or {}
    keys = dict.fromkeys(key for d in dicts for key in d)
    merged: dict[str, Any] = defaultdict(dict)
    for key in keys:
        values = [d[key] for d in dicts if d.get(key) is not None]
        how = agg_key_funcs.get(key)
        if values and isinstance(values[0], dict):
            merged[key] = merge_dicts(values, how, default_func)
        elif values:
            merged[key] = (how or default_func)(values)
    return dict(merged)
