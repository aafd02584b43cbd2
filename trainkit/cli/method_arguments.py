"""The Trainer method arguments of each LightningCLI subcommand, by subcommand: the parsed one's
are known after its parser is built; another's are found when first asked for (a subclass that
runs ``test`` after ``fit``), so only the chosen subcommand's parser is built to parse."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping


class MethodArguments(Mapping[str, list[str]]):
    """Every subcommand as a key, as in Lightning; ``find(subcommand)`` gives the argument
    names of one whose parser was not built."""

    def __init__(self, subcommands: Iterable[str], find: Callable[[str], list[str]]) -> None:
        self._subcommands = tuple(subcommands)
        self._find = find
        self._known: dict[str, list[str]] = {}

    def __setitem__(self, subcommand: str, names: list[str]) -> None:
        self._known[subcommand] = names

    def __getitem__(self, subcommand: str) -> list[str]:
        if subcommand not in self._known:
            if subcommand not in self._subcommands:
                raise KeyError(subcommand)
            self._known[subcommand] = self._find(subcommand)
        return self._known[subcommand]

    def __iter__(self) -> Iterator[str]:
        return iter(self._subcommands)

    def __len__(self) -> int:
        return len(self._subcommands)
