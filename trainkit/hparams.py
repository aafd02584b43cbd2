"""save_hyperparameters(): capture a constructor's arguments for checkpoints and hparams.yaml."""

from __future__ import annotations

import copy
import inspect
from collections.abc import Iterable, Sequence
from types import FrameType
from typing import Any


class AttributeDict(dict):
    """A dict whose keys read as attributes: ``hparams.lr``."""

    def __getattr__(self, key: str) -> Any:
        try:
            return self[key]
        except KeyError as err:
            raise AttributeError(f"no hyperparameter {key!r}; saved: {sorted(self)}") from err

    def __setattr__(self, key: str, value: object) -> None:
        self[key] = value


def collect_init_args(frame: FrameType | None, target: object) -> dict[str, Any]:
    """Arguments of every ``__init__`` of ``target`` on the stack; a subclass's override its parent's."""
    found: dict[str, Any] = {}
    while frame is not None:
        code = frame.f_code
        if code.co_name == "__init__" and frame.f_locals.get("self") is target:
            found.update(_frame_arguments(frame))
        frame = frame.f_back
    return found


def _frame_arguments(frame: FrameType) -> dict[str, Any]:
    info = inspect.getargvalues(frame)
    args = {name: info.locals[name] for name in info.args if name != "self"}
    if info.varargs:
        args[info.varargs] = info.locals[info.varargs]
    if info.keywords:
        args.update(info.locals[info.keywords])
    return args


def select_hparams(
    init_args: dict[str, Any], names: tuple[Any, ...], ignore: str | Iterable[str] | None
) -> dict[str, Any]:
    """Apply save_hyperparameters' positional names / dict and ``ignore`` to the init args."""
    if len(names) == 1 and isinstance(names[0], dict):
        selected = dict(names[0])
    elif names:
        missing = [n for n in names if n not in init_args]
        if missing:
            raise ValueError(
                f"save_hyperparameters: {missing} are not __init__ arguments; "
                f"expected some of {sorted(init_args)}"
            )
        selected = {n: init_args[n] for n in names}
    else:
        selected = dict(init_args)
    ignored = {ignore} if isinstance(ignore, str) else set(ignore or ())
    return {k: v for k, v in selected.items() if k not in ignored}


class HyperparametersMixin:
    """``save_hyperparameters`` and ``hparams``, as TrainModule and DataModule share them in
    Lightning (its HyperparametersMixin)."""

    CHECKPOINT_HYPER_PARAMS_KEY = "hyper_parameters"
    CHECKPOINT_HYPER_PARAMS_NAME = "hparams_name"
    CHECKPOINT_HYPER_PARAMS_TYPE = "hparams_type"

    def save_hyperparameters(
        self,
        *args: str | dict[str, Any],
        ignore: Sequence[str] | str | None = None,
        frame: FrameType | None = None,
        logger: bool = True,
    ) -> None:
        """Store the ``__init__`` arguments (all, those named, or a dict given) in
        ``self.hparams``, checkpoints and hparams.yaml, and the loggers unless ``logger=False``."""
        if frame is None:
            current = inspect.currentframe()
            frame = current.f_back if current else None
        init_args = collect_init_args(frame, self) if frame else {}
        self._hparams = AttributeDict(select_hparams(init_args, args, ignore))
        self._hparams_initial = copy.deepcopy(self._hparams)
        self._log_hyperparams = logger

    def remove_ignored_hparams(self, ignore_list: list[str]) -> None:
        """Drop these names from the saved hyperparameters (e.g. a base class's)."""
        for name in ignore_list:
            self.hparams.pop(name, None)

    @property
    def hparams(self) -> AttributeDict:
        """The saved hyperparameters (editable)."""
        saved = getattr(self, "_hparams", None)
        if saved is None:
            saved = self._hparams = AttributeDict()
        return saved

    @property
    def hparams_initial(self) -> AttributeDict:
        """A copy of the hyperparameters as ``save_hyperparameters`` saved them."""
        return AttributeDict(copy.deepcopy(getattr(self, "_hparams_initial", {})))

    @property
    def log_hyperparams(self) -> bool:
        """Whether loggers receive the hyperparameters (``save_hyperparameters(logger=...)``)."""
        return getattr(self, "_log_hyperparams", True)
