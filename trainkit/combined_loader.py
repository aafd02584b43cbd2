"""``CombinedLoader``: several iterables (a dict, list or tuple of them, nested) read together.

Modes: ``min_size`` (stop with the shortest), ``max_size_cycle`` (stop with the longest, the
others start over), ``max_size`` (stop with the longest, the others give None once done) and
``sequential`` (one after another). Iterating gives ``(batch, batch_idx, dataloader_idx)``; the
batch has the collection's shape (one iterable's batch in ``sequential`` mode, with its index).
Returned from ``train_dataloader``, a training step receives the batch; a list or dict of
training loaders is read as ``max_size_cycle``, of evaluation loaders as ``sequential``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, Literal, cast

Mode = Literal["min_size", "max_size_cycle", "max_size", "sequential"]
MODES: tuple[Mode, ...] = ("min_size", "max_size_cycle", "max_size", "sequential")
Step = tuple[Any, int, int]  # batch, batch_idx, dataloader_idx
_EMPTY = object()


def sized_len(iterable: object) -> int | None:
    """``len(iterable)``, or None when it has no length."""
    try:
        return len(iterable)  # type: ignore[arg-type]
    except (TypeError, NotImplementedError):
        return None


class _Tree:
    """The shape of a nested dict/list/tuple, to put a flat list of leaves back into it."""

    def __init__(self, rebuild: Callable[[list[Any]], Any] | None, children: list[_Tree]) -> None:
        self.rebuild = rebuild  # None: a leaf
        self.children = children

    def unflatten(self, leaves: Iterator[Any]) -> Any:
        if self.rebuild is None:
            return next(leaves)
        return self.rebuild([child.unflatten(leaves) for child in self.children])


def _flatten(collection: object, leaves: list[Any]) -> _Tree:
    if isinstance(collection, Mapping):
        keys, kind = list(collection), cast(Callable[[Any], Any], type(collection))
        children = [_flatten(collection[key], leaves) for key in keys]
        return _Tree(lambda values: kind(zip(keys, values)), children)
    if isinstance(collection, tuple) and hasattr(collection, "_fields"):  # a namedtuple
        named = type(collection)
        return _Tree(lambda values: named(*values), [_flatten(v, leaves) for v in collection])
    if isinstance(collection, list | tuple):
        sequence = type(collection)
        return _Tree(lambda values: sequence(values), [_flatten(v, leaves) for v in collection])
    leaves.append(collection)
    return _Tree(None, [])


def _lengths(iterables: list[Iterable[Any]], limits: list[int | float] | None) -> list[int | float]:
    lengths: list[int | float] = []
    for index, iterable in enumerate(iterables):
        length = sized_len(iterable)
        if length is None:
            raise TypeError(
                f"CombinedLoader: iterable {index} ({type(iterable).__name__}) has no length"
            )
        lengths.append(length if limits is None else min(length, limits[index]))
    return lengths


class CombinedLoader(Iterable[Step]):
    """Read the iterables of a collection together; see the module docstring for the modes."""

    def __init__(self, iterables: Any, mode: Mode = "min_size") -> None:
        if mode not in MODES:
            raise ValueError(f"CombinedLoader mode {mode!r}; expected one of {list(MODES)}")
        self._iterables = iterables
        self._flattened: list[Any] = []
        self._tree = _flatten(iterables, self._flattened)
        self._mode: Mode = mode
        self._limits: list[int | float] | None = None
        self._steps: Iterator[Step] | None = None

    @property
    def mode(self) -> Mode:
        return self._mode

    @property
    def iterables(self) -> Any:
        """The collection as given (with any loaders replaced through ``flattened``)."""
        return self._iterables

    @property
    def flattened(self) -> list[Any]:
        """The iterables as a flat list, in the collection's order."""
        return self._flattened

    @flattened.setter
    def flattened(self, flattened: list[Any]) -> None:
        if len(flattened) != len(self._flattened):
            raise ValueError(
                f"CombinedLoader.flattened: {len(flattened)} iterables; expected "
                f"{len(self._flattened)}, one per iterable of the collection"
            )
        self._flattened = list(flattened)
        self._iterables = self._tree.unflatten(iter(self._flattened))

    @property
    def sampler(self) -> Any:
        """Each iterable's ``sampler`` (None where it has none), in the collection's shape."""
        return self._tree.unflatten(iter([getattr(x, "sampler", None) for x in self._flattened]))

    @property
    def batch_sampler(self) -> Any:
        """Each iterable's ``batch_sampler`` (None where it has none), in the collection's shape."""
        found = [getattr(x, "batch_sampler", None) for x in self._flattened]
        return self._tree.unflatten(iter(found))

    @property
    def limits(self) -> list[int | float] | None:
        """At most this many batches from each iterable (None: all)."""
        return self._limits

    @limits.setter
    def limits(self, limits: int | float | list[int | float] | None) -> None:
        if isinstance(limits, int | float):
            limits = [limits] * len(self._flattened)
        elif limits is not None and len(limits) != len(self._flattened):
            raise ValueError(
                f"CombinedLoader.limits: {len(limits)} limits; expected one number or "
                f"{len(self._flattened)}, one per iterable"
            )
        self._limits = limits

    def __len__(self) -> int:
        """Batches in one pass (a TypeError when an iterable has no length)."""
        lengths = _lengths(self._flattened, self._limits)
        if not lengths:
            return 0
        if self._mode == "min_size":
            total = min(lengths)
        elif self._mode == "sequential":
            total = sum(lengths)
        else:
            total = max(lengths)
        return int(total)

    def __iter__(self) -> CombinedLoader:
        steps = {
            "min_size": self._min_size,
            "max_size_cycle": self._max_size_cycle,
            "max_size": self._max_size,
            "sequential": self._sequential,
        }[self._mode]()
        self._steps = steps
        return self

    def __next__(self) -> Step:
        if self._steps is None:
            iter(self)
        assert self._steps is not None
        return next(self._steps)

    def reset(self) -> None:
        """Forget the current pass; the next ``iter`` starts from the beginning."""
        self._steps = None

    def _limited(self, index: int, iterable: Iterable[Any]) -> Iterator[Any]:
        iterator = iter(iterable)
        if self._limits is None:
            return iterator
        return (batch for _, batch in zip(range(int(min(self._limits[index], 2**62))), iterator))

    def _shaped(self, batches: list[Any]) -> Any:
        return self._tree.unflatten(iter(batches))

    def _min_size(self) -> Iterator[Step]:
        iterators = [self._limited(i, it) for i, it in enumerate(self._flattened)]
        if not iterators:
            return
        for batch_idx, batches in enumerate(zip(*iterators)):
            yield self._shaped(list(batches)), batch_idx, 0

    def _max_size_cycle(self) -> Iterator[Step]:
        iterators = [self._limited(i, it) for i, it in enumerate(self._flattened)]
        done = [False] * len(iterators)
        batch_idx = 0
        while iterators:
            batches = []
            for index in range(len(iterators)):
                try:
                    batches.append(next(iterators[index]))
                except StopIteration:
                    done[index] = True
                    if all(done):
                        return
                    iterators[index] = self._limited(index, self._flattened[index])
                    batch = next(iterators[index], _EMPTY)
                    if batch is _EMPTY:  # an empty iterable cannot be cycled
                        return
                    batches.append(batch)
            yield self._shaped(batches), batch_idx, 0
            batch_idx += 1

    def _max_size(self) -> Iterator[Step]:
        iterators = [self._limited(i, it) for i, it in enumerate(self._flattened)]
        batch_idx = 0
        while True:
            batches: list[Any] = [None] * len(iterators)
            exhausted = True
            for index, iterator in enumerate(iterators):
                with contextlib.suppress(StopIteration):
                    batches[index] = next(iterator)
                    exhausted = False
            if exhausted:
                return
            yield self._shaped(batches), batch_idx, 0
            batch_idx += 1

    def _sequential(self) -> Iterator[Step]:
        for dataloader_idx, iterable in enumerate(self._flattened):
            for batch_idx, batch in enumerate(self._limited(dataloader_idx, iterable)):
                yield batch, batch_idx, dataloader_idx


class CombinedBatches(Iterable[Any]):
    """The batches of a CombinedLoader alone (what a training or evaluation step receives),
    with its length and its ``flattened`` loaders (to set their sampler's epoch)."""

    def __init__(self, combined: CombinedLoader) -> None:
        self.combined = combined

    @property
    def flattened(self) -> list[Any]:
        return self.combined.flattened

    def __len__(self) -> int:
        return len(self.combined)

    def __iter__(self) -> Iterator[Any]:
        return (batch for batch, _, _ in iter(self.combined))
