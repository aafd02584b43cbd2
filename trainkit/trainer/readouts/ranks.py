"""Where this process is among the ranks, as Lightning names it: world size, ranks, devices and
the distributed sampler's arguments, read from the strategy and the resolved devices."""

from __future__ import annotations

from trainkit.state import RunState
from trainkit.trainer.readouts.readout import Readout
from trainkit.trainer.stage_settings import StageSettings


class RankReadouts:
    """World size, ranks and devices (Lightning's names)."""

    run_state: RunState
    settings: StageSettings

    world_size = Readout(lambda t: t.run_state.strategy.world_size)
    global_rank = Readout(lambda t: t.run_state.strategy.global_rank)
    local_rank = Readout(lambda t: t.run_state.strategy.local_rank)
    node_rank = Readout(lambda t: t.run_state.strategy.node_rank)
    is_global_zero = Readout(lambda t: t.run_state.strategy.is_global_zero)
    device_ids = Readout(
        lambda t: list(t.settings.selection.ids),
        "The ids of the devices this node runs on (process slots on CPU).",
    )
    num_devices = Readout(lambda t: t.settings.selection.count)
    distributed_sampler_kwargs = Readout(
        lambda t: t.run_state.strategy.distributed_sampler_kwargs(),
        "``num_replicas``/``rank`` of the DistributedSampler (None when not distributed).",
    )
