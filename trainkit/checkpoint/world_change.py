"""Resuming on another world size: how far into the interrupted epoch the new ranks start.

A mid-epoch checkpoint records the batches each rank had trained. The default distributed
sampler hands rank ``r`` positions ``r, r + W, r + 2W, ...`` of one shuffled order that every
rank draws from the same seed and epoch, so after ``k`` batches of ``b`` on ``W`` ranks the first
``k * W * b`` samples of that order are trained, whatever ``W`` is. On ``W'`` ranks with batches of
``b'`` the epoch goes on after ``(k * W * b) // (W' * b')`` batches: the same samples are left,
plus fewer than one global batch trained again where the sizes do not divide. A single process
(no distributed sampler) orders the epoch its own way: to or from one process the number of
samples carries over, not which ones.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class WorldChange:
    """A resume on ``world_size`` ranks of a checkpoint saved by ``saved_world_size``."""

    saved_world_size: int
    world_size: int
    skip: int  # batches of the interrupted epoch each new rank skips (0: none was interrupted)
    samples_done: int  # samples of that epoch the saved ranks had trained
    retrained: int  # of those, trained again because they do not fill a whole new global batch

    def describe(self, epoch: int) -> str:
        """One line for the user: what carried over and where the epoch goes on."""
        line = (
            f"trainkit: the checkpoint was saved by {self.saved_world_size} rank(s) and resumes on "
            f"{self.world_size}: weights and optimizer state carry over"
        )
        if self.samples_done:
            line += (
                f"; epoch {epoch} goes on after the {self.samples_done} samples it had trained "
                f"({self.skip} batches per rank skipped, {self.retrained} trained again)"
            )
        return line


def world_change(
    saved_world_size: int,
    saved_batch_size: int | None,
    saved_skip: int,
    world_size: int,
    batch_size: int | None,
) -> WorldChange:
    """The new ranks' start in the interrupted epoch (batch sizes None where a loader has no
    fixed one: then counted in batches, as if both were equal)."""
    if saved_batch_size is None or batch_size is None:
        saved_batch_size = batch_size = 1
    samples = saved_skip * saved_world_size * saved_batch_size
    per_step = world_size * batch_size
    skip = samples // per_step
    return WorldChange(saved_world_size, world_size, skip, samples, samples - skip * per_step)
