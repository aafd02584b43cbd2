"""DDPSpawnStrategy: DDP whose ranks are spawned from this Python process (notebooks too)."""

from __future__ import annotations

from trainkit.strategies.ddp import DDPStrategy


class DDPSpawnStrategy(DDPStrategy):
    """Like ddp, but ranks start with torch.multiprocessing; results return to the caller."""

    name = "ddp_spawn"
    launches_processes = False
    spawns_processes = True
    start_method = "spawn"
