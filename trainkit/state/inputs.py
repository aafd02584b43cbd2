"""What a stage is given: the module, the data module, the loaders, the callbacks and the
loggers. Frozen: the stage runner and the tuner replace it whole (``dataclasses.replace``), so a
tuner's trials run on a copy and the stage's own goes back untouched when they end."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trainkit.callbacks.base import Callback
    from trainkit.datamodule import DataModule
    from trainkit.loggers.base import Logger
    from trainkit.module import TrainModule


@dataclass(frozen=True)
class StageInputs:
    """What a stage is given (replaced whole, never changed field by field)."""

    module: TrainModule | None = None  # the module of the running stage
    datamodule: DataModule | None = None
    callbacks: list[Callback] = field(default_factory=list)
    loggers: list[Logger] = field(default_factory=list)
    train_loader: Any = None  # the user's loader (any iterable), prepared by the strategy
    val_loaders: list[Any] = field(default_factory=list)  # of fit, or of validate
    test_loaders: list[Any] = field(default_factory=list)
    predict_loaders: list[Any] = field(default_factory=list)
    stage_loaders: list[Any] = field(default_factory=list)  # validate/test/predict's, as run
    # kind ('train', 'val', 'test', 'predict') -> that kind's loaders asked for again from the
    # module's or datamodule's hooks (reloading every N epochs, a new batch size); None when the
    # stage was given its loaders
    reload_loaders: Callable[[str], list[Any]] | None = None
