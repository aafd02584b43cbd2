"""Where a run is: epoch, optimizer steps and how far into the epoch, as a checkpoint records it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass
class LoopPosition:
    """Where a run is: epoch, optimizer steps, and how far into the current epoch."""

    epoch: int = 0
    global_step: int = 0  # optimizer steps (under manual optimization, every optimizer's step)
    batches_stepped: int = 0  # training batches that ended an optimizer step: the loggers' axis
    batches_done: int = 0  # training batches of the current epoch already stepped
    phase: str | None = None  # while a fit epoch runs: 'batches', then 'end'; else None
    fitting: bool = False  # the stage is fit (a checkpoint then records a partial epoch)
    epoch_batches: int | float = 0  # training batches the current epoch runs (limits applied)
    batches_seen: int = 0  # training batches the last epoch actually ran
    # max_steps ended the fit inside ``epoch`` and its end hooks ran: Lightning counts that epoch
    # (``current_epoch``, a checkpoint's ``epoch``), while a resumed fit goes on inside it
    cut_short: bool = False

    @property
    def current_epoch(self) -> int:
        """Lightning's ``current_epoch``: the epochs ended, an epoch cut short counted."""
        return self.epoch + 1 if self.cut_short else self.epoch

    def state_dict(self) -> dict[str, Any]:
        """The loop position a checkpoint records: the epoch, steps, batches done in it, and
        whether it is complete (its end ran over every batch, not cut short by max_steps)."""
        if self.cut_short:  # the fit ended inside the epoch: a resumed fit finishes it
            return {
                "epoch": self.epoch,
                "global_step": self.global_step,
                "batches_stepped": self.batches_stepped,
                "batches_in_epoch": self.batches_done,
                "epoch_completed": False,
                "cut_short": True,
            }
        phase = self.phase if self.fitting else None
        batches = self.batches_done if phase else 0
        completed = not self.fitting or (phase == "end" and batches >= self.epoch_batches)
        return {
            "epoch": self.epoch,
            "global_step": self.global_step,
            "batches_stepped": self.batches_stepped,
            "batches_in_epoch": batches,
            "epoch_completed": completed,
        }

    def load_state_dict(self, state: dict[str, Any]) -> int:
        """Continue from a recorded position; returns the batches of the epoch to skip."""
        self.global_step = state["global_step"]
        # checkpoints from before the two counters differed: one step per batch
        self.batches_stepped = state.get("batches_stepped", self.global_step)
        completed = state["epoch_completed"]
        self.epoch = state["epoch"] + (1 if completed else 0)
        self.batches_done, self.phase, self.cut_short = 0, None, False
        return 0 if completed else state["batches_in_epoch"]
