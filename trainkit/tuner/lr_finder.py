"""The learning-rate range test's result (``Tuner.lr_find`` returns it): the rates tried, the
smoothed loss at each, the suggested rate and a plot."""

from __future__ import annotations

import math
import sys
from typing import TYPE_CHECKING, Any

from trainkit.errors import MisconfigurationError

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure, SubFigure

MODES = ("linear", "exponential")


class LRFinder:
    """What an LR range test found: ``results`` holds ``lr`` (the rate of each step) and
    ``loss`` (the smoothed training loss after it); ``suggestion()`` picks a rate."""

    def __init__(self, mode: str, lr_min: float, lr_max: float, num_training: int) -> None:
        if mode not in MODES:
            raise MisconfigurationError(
                f"LR finder mode {mode!r}; expected one of {MODES}: how the rate grows each step"
            )
        self.mode = mode
        self.lr_min = lr_min
        self.lr_max = lr_max
        self.num_training = num_training
        self.results: dict[str, list[float]] = {}
        self._optimal_idx: int | None = None

    def suggestion(self, skip_begin: int = 10, skip_end: int = 1) -> float | None:
        """The rate where the smoothed loss falls fastest (its steepest negative slope over the
        rates), ignoring the first ``skip_begin`` and last ``skip_end`` steps and non-finite
        losses; None when fewer than two steps are left."""
        self._optimal_idx = self.steepest_index(skip_begin, skip_end)
        if self._optimal_idx is None:
            print(
                "trainkit: failed to compute a learning rate suggestion: fewer than 2 finite "
                f"losses after skipping {skip_begin} at the start and {skip_end} at the end; "
                "raise num_training or give the loader more batches",
                file=sys.stderr,
                flush=True,
            )
            return None
        return self.results["lr"][self._optimal_idx]

    def steepest_index(self, skip_begin: int = 10, skip_end: int = 1) -> int | None:
        """The step ``suggestion`` picks (None: fewer than two finite losses left), silently."""
        import torch

        losses, lrs = self.results.get("loss", []), self.results.get("lr", [])
        kept = [i for i in range(skip_begin, len(losses) - skip_end) if math.isfinite(losses[i])]
        if len(kept) < 2:
            return None
        slope = torch.gradient(
            torch.tensor([losses[i] for i in kept]), spacing=[torch.tensor([lrs[i] for i in kept])]
        )[0]
        return kept[int(torch.argmin(slope))]

    def plot(
        self, suggest: bool = False, show: bool = False, ax: Axes | None = None
    ) -> Figure | SubFigure | None:
        """The loss over the learning rate (log scale for an exponential test) as a matplotlib
        figure, the suggested rate marked in red with ``suggest``; drawn into ``ax`` if given."""
        try:
            import matplotlib.pyplot as plt
        except ImportError as error:
            raise MisconfigurationError(
                "LRFinder.plot needs matplotlib, which is not installed; install it with "
                "`pip install matplotlib`"
            ) from error
        lrs, losses = self.results["lr"], self.results["loss"]
        if ax is None:
            figure, ax = plt.subplots()
        else:
            figure = ax.figure
        ax.plot(lrs, losses)
        if self.mode == "exponential":
            ax.set_xscale("log")
        ax.set_xlabel("Learning rate")
        ax.set_ylabel("Loss")
        if suggest and self.suggestion() is not None and self._optimal_idx is not None:
            index = self._optimal_idx
            ax.plot(lrs[index], losses[index], markersize=10, marker="o", color="red")
        if show:
            plt.show()
        return figure

    def state_dict(self) -> dict[str, Any]:
        """Plain values (for a checkpoint, or a spawned rank's result)."""
        return {
            "mode": self.mode,
            "lr_min": self.lr_min,
            "lr_max": self.lr_max,
            "num_training": self.num_training,
            "results": self.results,
        }

    @classmethod
    def from_state_dict(cls, state: dict[str, Any]) -> LRFinder:
        """The finder ``state_dict`` described."""
        finder = cls(state["mode"], state["lr_min"], state["lr_max"], state["num_training"])
        finder.results = state["results"]
        return finder
