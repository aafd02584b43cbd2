"""Where each local rank is: a small shared-memory board that ranks write and the launcher reads.

A rank marks each phase it enters (a memory write, no system call); when a collective times
out, the launcher reads the board to name the late ranks and what the others were waiting in.
"""

from __future__ import annotations

import mmap
import os
import struct
import time
from dataclasses import dataclass
from pathlib import Path

from trainkit.distributed.signals import BOARD_ENV

_SLOT = struct.Struct("<dqqq")  # time entered (monotonic), phase, epoch, batch

# phase id -> (what the rank was doing, whether it waits on its peers there)
PHASES: dict[int, tuple[str, bool]] = {
    0: ("starting up", False),
    1: ("setup", True),
    2: ("loading the next batch", False),
    3: ("training_step", False),
    4: ("backward (gradient all-reduce)", True),
    5: ("optimizer step", True),
    6: ("validation", True),
    7: ("saving a checkpoint", True),
    8: ("epoch end (metric sync)", True),
    9: ("finishing (final barrier)", True),
}
STARTING, SETUP, DATA, TRAINING_STEP, BACKWARD, OPTIMIZER_STEP = 0, 1, 2, 3, 4, 5
VALIDATION, CHECKPOINT, EPOCH_END, FINISHING = 6, 7, 8, 9


class RankBoard:
    """One rank's slot on the board (a no-op when no launcher made one)."""

    def __init__(self) -> None:
        self._map: mmap.mmap | None = None
        self._offset = 0
        self._epoch = self._batch = -1
        path = os.environ.get(BOARD_ENV)
        local_rank = int(os.environ.get("LOCAL_RANK", 0))
        if path and Path(path).is_file():
            with open(path, "r+b") as handle:
                self._map = mmap.mmap(handle.fileno(), 0)
            self._offset = local_rank * _SLOT.size

    def mark(self, phase: int, epoch: int | None = None, batch: int | None = None) -> None:
        """Record that this rank now enters ``phase`` (at ``epoch``/``batch``, else the last)."""
        if self._map is None:
            return
        if epoch is not None:
            self._epoch, self._batch = epoch, batch if batch is not None else -1
        _SLOT.pack_into(self._map, self._offset, time.monotonic(), phase, self._epoch, self._batch)


def create_board(folder: str, local_world_size: int) -> str:
    """The launcher's side: an empty board file for ``local_world_size`` ranks."""
    path = Path(folder) / "rank_board"
    path.write_bytes(b"\0" * (_SLOT.size * local_world_size))
    return str(path)


@dataclass(frozen=True)
class RankPosition:
    """One rank's last recorded phase."""

    rank: int
    phase: int
    epoch: int
    batch: int
    seconds: float  # how long it has been in that phase
    # it raised a collective timeout: it waited on its peers, whatever its phase (DDP's buffer
    # broadcast runs inside training_step)
    in_collective: bool = False

    @property
    def doing(self) -> str:
        doing, waits = PHASES.get(self.phase, ("unknown", False))
        return f"{doing}, inside a collective" if self.in_collective and not waits else doing

    @property
    def waits_on_peers(self) -> bool:
        return self.in_collective or PHASES.get(self.phase, ("unknown", False))[1]

    def describe(self, seconds: str | None = None) -> str:
        where = f"epoch {self.epoch}, batch {self.batch}, " if self.epoch >= 0 else ""
        return f"{self.doing} ({where}for {seconds or f'{self.seconds:.1f}'} s)"


def read_board(path: str, first_rank: int = 0) -> list[RankPosition]:
    """Every slot of the board; ``first_rank`` turns local ranks into global ones."""
    data = Path(path).read_bytes()
    now = time.monotonic()
    positions = []
    for local_rank in range(len(data) // _SLOT.size):
        entered, phase, epoch, batch = _SLOT.unpack_from(data, local_rank * _SLOT.size)
        seconds = now - entered if entered else 0.0
        positions.append(RankPosition(first_rank + local_rank, phase, epoch, batch, seconds))
    return positions


# within one batch: loading it, its step, backward, optimizer step, then what may follow it
_ORDER_IN_BATCH = {DATA: 0, TRAINING_STEP: 1, BACKWARD: 2, OPTIMIZER_STEP: 3, VALIDATION: 4}
_ORDER_IN_BATCH.update({CHECKPOINT: 5, EPOCH_END: 6, FINISHING: 7})


def behind(positions: list[RankPosition]) -> list[RankPosition]:
    """The ranks behind the furthest one (by epoch, batch and phase within the batch)."""

    def progress(p: RankPosition) -> tuple[int, int, int]:
        return (p.epoch, p.batch, _ORDER_IN_BATCH.get(p.phase, -1))

    furthest = max(progress(p) for p in positions)
    return [p for p in positions if progress(p) < furthest]


def late_ranks(
    positions: list[RankPosition], other_nodes: bool = False
) -> tuple[list[RankPosition], list[RankPosition]]:
    """(late, waiting): the ranks behind the furthest one (the furthest cannot go on without
    them); if all are at the same point, the ones not inside a collective (all of them only
    where ranks on ``other_nodes`` may be the ones waiting). With ``other_nodes``, ranks behind
    only inside a collective are not late: they wait for another node."""

    late = behind(positions)
    if late and other_nodes and all(p.waits_on_peers for p in late):
        # behind, but inside a collective its peers here have left: its part of it was sent,
        # and it waits for data from another node's ranks (a node cut off mid-all-reduce)
        return [], list(positions)
    if not late:
        late = [p for p in positions if not p.waits_on_peers]
        if len(late) == len(positions) and not other_nodes:
            late = []
    return late, [p for p in positions if p not in late]


def explain(positions: list[RankPosition], timed_out: bool, other_nodes: bool = False) -> str:
    """One line for a node's launcher: who was late and where the others waited (after a
    timeout), or where each rank was (after an abort such as a collective mismatch). The board
    holds this node's ranks only: with ``other_nodes``, a node whose ranks all waited says the
    late rank is elsewhere."""
    if not timed_out:
        return f"where each rank was: {listed(positions)}"
    late, waiting = late_ranks(positions, other_nodes)
    if not late and other_nodes:
        return (
            f"a collective timed out with every rank of this node waiting ({listed(positions)}): "
            "the late rank is on another node (its node's launcher names it)"
        )
    if not late:
        return (
            f"a collective timed out with every rank waiting ({listed(positions)}): some rank "
            "called a collective the others never call"
        )
    return f"a collective timed out: late: {listed(late)}; waiting: {listed(waiting) or 'none'}"


def listed(items: list[RankPosition]) -> str:
    """``rank 3 in X; ranks 0-2, 4 in Y``: ranks at the same phase of the same batch together,
    so a node of many ranks reports in one short line."""
    groups: dict[tuple[int, int, int], list[RankPosition]] = {}
    for position in items:
        groups.setdefault((position.phase, position.epoch, position.batch), []).append(position)
    parts = []
    for members in groups.values():
        first = members[0]
        if len(members) == 1:
            parts.append(f"rank {first.rank} in {first.describe()}")
            continue
        low, high = (f"{f(p.seconds for p in members):.1f}" for f in (min, max))
        seconds = low if low == high else f"{low}-{high}"
        ranks = _ranges(sorted(p.rank for p in members))
        parts.append(f"ranks {ranks} in {first.describe(seconds)}")
    return "; ".join(parts)


def _ranges(ranks: list[int]) -> str:
    """``[0, 1, 2, 4]`` -> ``0-2, 4``."""
    spans: list[list[int]] = []
    for rank in ranks:
        if spans and rank == spans[-1][1] + 1:
            spans[-1][1] = rank
        else:
            spans.append([rank, rank])
    return ", ".join(str(a) if a == b else f"{a}-{b}" for a, b in spans)
