"""Strategies, by the name used in ``trainer.strategy``: a literal registry."""

from __future__ import annotations

from trainkit.errors import ConfigError
from trainkit.strategies.base import Placement, Strategy
from trainkit.strategies.ddp import DDPStrategy
from trainkit.strategies.ddp2 import DDP2Strategy
from trainkit.strategies.ddp_spawn import DDPSpawnStrategy
from trainkit.strategies.deepspeed import PRESETS as DEEPSPEED_PRESETS
from trainkit.strategies.deepspeed import DeepSpeedStrategy
from trainkit.strategies.dp import DataParallelStrategy
from trainkit.strategies.fsdp import FSDPStrategy
from trainkit.strategies.pipeline import PipelineStrategy
from trainkit.strategies.sharded import ShardedStrategy
from trainkit.strategies.single import SingleDeviceStrategy

STRATEGIES: dict[str, type[Strategy]] = {
    "single": SingleDeviceStrategy,
    "ddp": DDPStrategy,
    "ddp_spawn": DDPSpawnStrategy,
    "dp": DataParallelStrategy,
    "ddp2": DDP2Strategy,
    "pipeline": PipelineStrategy,
    "fsdp": FSDPStrategy,
    "ddp_sharded": ShardedStrategy,
    "sharded": ShardedStrategy,
    "deepspeed": DeepSpeedStrategy,
}


def select_strategy(strategy: str | Strategy | None, placement: Placement) -> Strategy:
    """Build the named strategy for ``placement``; ``auto`` is ddp for several devices/nodes,
    else single. A Strategy instance is connected to the placement as it is."""
    selection, num_nodes, cluster = placement.selection, placement.num_nodes, placement.cluster
    if isinstance(strategy, Strategy):
        chosen = strategy
    elif strategy in (None, "auto"):
        many = selection.count * num_nodes > 1 or cluster.world_size > 1
        chosen = DDPStrategy() if many else SingleDeviceStrategy()
    elif isinstance(strategy, str) and strategy in STRATEGIES:
        chosen = STRATEGIES[strategy]()
    elif isinstance(strategy, str) and strategy in DEEPSPEED_PRESETS:
        chosen = DeepSpeedStrategy.preset(strategy)
    else:
        raise ConfigError(
            "trainer.strategy",
            strategy,
            f"'auto' or one of {', '.join(STRATEGIES)}",
            "see docs/strategies.md",
        )
    chosen.connect(placement)
    return chosen


__all__ = [
    "STRATEGIES",
    "DDPSpawnStrategy",
    "DDPStrategy",
    "DeepSpeedStrategy",
    "Placement",
    "SingleDeviceStrategy",
    "Strategy",
    "select_strategy",
]
