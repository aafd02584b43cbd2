"""DDPSpawnStrategy: DDP whose ranks are spawned from this Python process (notebooks too)."""

from __future__ import annotations

import dataclasses

from trainkit.distributed.launchers.reexec import can_reexecute
from trainkit.strategies.ddp import DDPOptions, DDPStrategy


class DDPSpawnStrategy(DDPStrategy):
    """Like ddp, but ranks start with torch.multiprocessing; results return to the caller."""

    name = "ddp_spawn"
    launches_processes = False
    spawns_processes = True

    def __init__(
        self,
        find_unused_parameters: bool = False,
        static_graph: bool = False,
        gradient_as_bucket_view: bool = False,
        process_group_backend: str | None = None,
        timeout: float | None = None,
        start_method: str | None = None,
    ) -> None:
        """
        Args:
            find_unused_parameters: Let DDP skip parameters a step did not use (slower).
            static_graph: Tell DDP the graph is the same every step (faster, fewer checks).
            gradient_as_bucket_view: Gradients as views into DDP's buckets (saves memory).
            process_group_backend: Override the backend (gloo on CPU, nccl on GPU).
            timeout: Seconds a collective waits for a late rank before the job fails.
            start_method: 'spawn' or 'fork' (default: spawn, or fork where this session cannot
                be re-imported: a notebook, stdin, ``python -c``).
        """
        super().__init__(
            find_unused_parameters,
            static_graph,
            gradient_as_bucket_view,
            process_group_backend,
            timeout,
        )
        # classes defined in an interactive __main__ exist only in this process: fork them
        self.start_method = start_method or ("spawn" if can_reexecute() else "fork")

    @classmethod
    def forked(cls, options: DDPOptions) -> DDPSpawnStrategy:
        """The fork-started twin of a ddp strategy with these options (for interactive sessions)."""
        return cls(**dataclasses.asdict(options), start_method="fork")
