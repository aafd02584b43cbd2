"""Strategies, by the name used in ``trainer.strategy``: a literal registry."""

from __future__ import annotations

import difflib
import warnings
from collections.abc import Callable
from functools import partial

from trainkit.errors import ConfigError
from trainkit.strategies.base import Placement, Strategy
from trainkit.strategies.ddp import DDPSpawnStrategy, DDPStrategy
from trainkit.strategies.ddp2 import DDP2Strategy
from trainkit.strategies.deepspeed import PRESETS as DEEPSPEED_PRESETS
from trainkit.strategies.deepspeed import DeepSpeedStrategy
from trainkit.strategies.dp import DataParallelStrategy
from trainkit.strategies.fsdp import FSDPStrategy
from trainkit.strategies.horovod import HorovodStrategy
from trainkit.strategies.parallel import ParallelStrategy
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
    "horovod": HorovodStrategy,
}

# Lightning's registered names for a strategy with one setting changed
ALIASES: dict[str, Callable[[], Strategy]] = {
    "single_device": SingleDeviceStrategy,
    "ddp_find_unused_parameters_true": partial(DDPStrategy, find_unused_parameters=True),
    "ddp_find_unused_parameters_false": DDPStrategy,
    "ddp_spawn_find_unused_parameters_true": partial(DDPSpawnStrategy, find_unused_parameters=True),
    "ddp_spawn_find_unused_parameters_false": DDPSpawnStrategy,
    "ddp_fork": partial(DDPSpawnStrategy, start_method="fork"),
    "ddp_notebook": partial(DDPSpawnStrategy, start_method="fork"),
    "ddp_fork_find_unused_parameters_true": partial(
        DDPSpawnStrategy, start_method="fork", find_unused_parameters=True
    ),
    "fsdp_cpu_offload": partial(FSDPStrategy, cpu_offload=True),
}


def strategy_from_accelerator(
    accelerator: str, strategy: str | Strategy
) -> tuple[str, str | Strategy]:
    """Lightning 1.x named the strategy in ``accelerator`` (``accelerator="horovod"``, ``"ddp"``):
    such a name picks the strategy, with one warning, and the devices' kind is 'auto'."""
    if not isinstance(accelerator, str) or accelerator not in {*STRATEGIES, *ALIASES}:
        return accelerator, strategy
    if strategy not in (None, "auto"):
        raise ConfigError(
            "trainer.accelerator",
            accelerator,
            "'auto', 'cpu' or 'gpu' (a strategy's name here is Lightning 1.x's spelling of "
            f"trainer.strategy, which is already {getattr(strategy, 'name', strategy)!r})",
            "drop trainer.accelerator or set it to the devices' kind",
        )
    warnings.warn(
        f"trainer.accelerator {accelerator!r} is Lightning 1.x's spelling of trainer.strategy "
        f"{accelerator!r}: running it as the strategy on accelerator 'auto' (write "
        f"strategy: {accelerator})",
        stacklevel=2,
    )
    return "auto", accelerator


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
    elif isinstance(strategy, str) and strategy in ALIASES:
        chosen = ALIASES[strategy]()
    elif isinstance(strategy, str) and strategy in DEEPSPEED_PRESETS:
        chosen = DeepSpeedStrategy.preset(strategy)
    else:
        close = difflib.get_close_matches(str(strategy), [*STRATEGIES, *ALIASES], n=1)
        raise ConfigError(
            "trainer.strategy",
            strategy,
            f"'auto' or one of {', '.join(STRATEGIES)} (or Lightning's aliases: "
            f"{', '.join(ALIASES)}, deepspeed_stage_N[_offload])",
            (f"did you mean {close[0]!r}? " if close else "") + "see docs/strategies.md",
        )
    chosen.connect(placement)
    return chosen


__all__ = [
    "ALIASES",
    "STRATEGIES",
    "DDPSpawnStrategy",
    "DDPStrategy",
    "DataParallelStrategy",
    "DeepSpeedStrategy",
    "FSDPStrategy",
    "HorovodStrategy",
    "ParallelStrategy",
    "Placement",
    "SingleDeviceStrategy",
    "Strategy",
    "select_strategy",
    "strategy_from_accelerator",
]
