"""A batch-size trial of a validate, test or predict stage: a few steps of its loop over the
stage's loaders, which are resized in place (the running loop then iterates the new ones)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from trainkit.errors import MisconfigurationError
from trainkit.loops.evaluation import EvalLoop
from trainkit.loops.predict import PredictLoop
from trainkit.state import RunState

LOADER_KIND = {"validate": "val", "test": "test", "predict": "predict"}
LOOP_STAGE = {"validate": "validation", "test": "test"}


class EvalTrials:
    """Runs the trials of the running validate/test/predict stage on ``state.given.stage_loaders``."""

    def __init__(self, state: RunState) -> None:
        fn = state.trainer_state.fn
        stage = "" if fn is None else fn.value
        if stage not in LOADER_KIND:
            raise MisconfigurationError(
                f"batch size trials of stage {stage!r}; expected one of {sorted(LOADER_KIND)}"
            )
        if len(state.given.stage_loaders) > 1:
            raise MisconfigurationError(
                f"The Batch size finder cannot be used with multiple {LOADER_KIND[stage]} "
                "dataloaders; return one loader from the hook"
            )
        self.state = state
        self.stage = stage

    @property
    def loaders(self) -> list[Any]:
        return self.state.given.stage_loaders

    def run(self, steps: int) -> None:
        """``steps`` batches of the stage's loop."""
        if self.stage == "predict":
            PredictLoop(self.state).run(self.loaders, steps)
        else:
            EvalLoop(self.state, LOOP_STAGE[self.stage]).run(self.loaders, steps)

    def reload(self) -> None:
        """The stage's loaders asked for again (at the current batch size), in place."""
        self.loaders[:] = self.source()(LOADER_KIND[self.stage])

    def source(self) -> Callable[[str], list[Any]]:
        reload = self.state.given.reload_loaders
        if reload is None:
            raise MisconfigurationError(
                "The Batch size finder cannot be used with dataloaders passed directly to "
                f"`.{self.stage}()`. Please disable the feature or incorporate the dataloader "
                "into your LightningModule or LightningDataModule."
            )
        return reload
