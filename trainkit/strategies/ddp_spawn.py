"""DDPSpawnStrategy: DDP whose ranks are spawned from this Python process (notebooks too)."""

from __future__ import annotations

from trainkit.strategies.ddp import DDPStrategy


class DDPSpawnStrategy(DDPStrategy):
    """Like ddp, but ranks start with torch.multiprocessing; results return to the caller."""

    name = "ddp_spawn"
    launches_processes = False
    spawns_processes = True
    start_method = "spawn"  # "fork" when the session cannot be re-imported (notebook, stdin)

    def connect(self, selection, num_nodes, cluster) -> None:  # type: ignore[no-untyped-def]
        super().connect(selection, num_nodes, cluster)
        from trainkit.distributed.launchers.reexec import can_reexecute

        if not can_reexecute():
            self.start_method = "fork"  # classes defined in __main__ exist only in this process
