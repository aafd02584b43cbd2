"""What a strategy can do is an attribute of the strategy, and each strategy chooses the launcher
of its ranks: checked in-process, without starting any rank."""

from __future__ import annotations

import ast
import pathlib
from types import SimpleNamespace

import pytest

from trainkit.callbacks import StochasticWeightAveraging
from trainkit.devices import DeviceSelection
from trainkit.distributed.environments import (
    ClusterEnvironment,
    LoneEnvironment,
    OpenMPIEnvironment,
    TorchElasticEnvironment,
    TrainkitLauncherEnvironment,
)
from trainkit.distributed.launchers.choice import Start, how_to_start
from trainkit.distributed.launchers.reexec import ReexecLauncher
from trainkit.distributed.launchers.spawn import SpawnLauncher
from trainkit.errors import ConfigError, MisconfigurationError
from trainkit.scaling import BatchLoading
from trainkit.strategies import (
    ALIASES,
    STRATEGIES,
    DDPSpawnStrategy,
    DDPStrategy,
    ParallelStrategy,
    Placement,
    select_strategy,
)

TWO_CPUS = DeviceSelection("cpu", (0, 1))
ONE_CPU = DeviceSelection("cpu", (0,))


def placed(
    strategy: str, selection: DeviceSelection = TWO_CPUS, cluster: ClusterEnvironment | None = None
):
    environment = cluster or LoneEnvironment()
    return select_strategy(strategy, Placement(selection, 1, environment))


@pytest.mark.parametrize(
    ("name", "shards", "loading", "per_device"),
    [
        ("ddp", False, BatchLoading.PER_DEVICE, True),
        ("ddp_spawn", False, BatchLoading.PER_DEVICE, True),
        ("fsdp", True, BatchLoading.PER_DEVICE, True),
        ("ddp_sharded", True, BatchLoading.PER_DEVICE, True),
        ("sharded", True, BatchLoading.PER_DEVICE, True),
        ("deepspeed", True, BatchLoading.PER_DEVICE, True),
        ("pipeline", False, BatchLoading.SHARED, True),
        ("ddp2", False, BatchLoading.PER_NODE, False),
        ("dp", False, BatchLoading.PER_NODE, False),
        ("single", False, BatchLoading.PER_DEVICE, False),
    ],
)
def test_each_strategy_states_its_capabilities(name, shards, loading, per_device):
    kind = STRATEGIES[name]
    assert kind.shards_state is shards
    assert kind.batch_loading is loading
    assert kind.process_per_device is per_device


def test_every_multi_process_strategy_owns_its_ranks_through_parallel_strategy():
    for name in ("ddp", "ddp_spawn", "fsdp", "ddp_sharded", "deepspeed", "pipeline", "ddp2"):
        assert issubclass(STRATEGIES[name], ParallelStrategy), name
    # DDP only where the strategy is DDP
    for name in ("fsdp", "ddp_sharded", "deepspeed", "pipeline", "ddp2"):
        assert not issubclass(STRATEGIES[name], DDPStrategy), name


def test_swa_refuses_the_sharded_strategy_by_capability_not_by_name():
    """The name check missed 'ddp_sharded' (the strategy's real name): the capability cannot."""
    for name in ("ddp_sharded", "sharded", "fsdp"):
        trainer = SimpleNamespace(strategy=STRATEGIES[name]())
        with pytest.raises(MisconfigurationError, match="does not support the"):
            StochasticWeightAveraging(swa_lrs=0.1).setup(trainer, None, "fit")


def test_no_trainkit_module_decides_by_a_strategy_name():
    """``strategy.name`` is for people; code compares capabilities."""
    offenders = []
    for path in pathlib.Path("trainkit").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if not isinstance(node, ast.Compare):
                continue
            left = node.left
            if (
                isinstance(left, ast.Attribute)
                and left.attr == "name"
                and "strategy" in ast.unparse(left.value)
            ):
                offenders.append(f"{path}:{node.lineno}: {ast.unparse(node)}")
    assert offenders == []


def test_one_process_needs_no_launcher():
    assert placed("single", ONE_CPU).launcher() is None
    assert placed("dp").launcher() is None  # one process drives both devices
    assert placed("ddp", ONE_CPU).launcher() is None


@pytest.fixture
def reexecutable(monkeypatch):
    """A script or the trainkit command (a pytest worker's command line cannot be re-run)."""
    from trainkit.distributed.launchers import reexec

    monkeypatch.setattr(reexec, "can_reexecute", lambda: True)


def test_several_ranks_are_re_executed_or_spawned_as_the_strategy_says(reexecutable):
    ddp = placed("ddp")
    launcher = ddp.launcher()
    assert isinstance(launcher, ReexecLauncher)
    spawn = placed("ddp_spawn")
    launcher = spawn.launcher()
    assert isinstance(launcher, SpawnLauncher)
    assert launcher.strategy is spawn
    assert launcher.start_method == spawn.start_method


def test_an_external_launcher_started_the_ranks_already():
    for name in ("ddp", "ddp_spawn", "fsdp", "ddp2"):
        per_node = 2 if STRATEGIES[name].process_per_device else 1
        torchrun = TorchElasticEnvironment(world_size=per_node, local_world_size=per_node)
        assert placed(name, cluster=torchrun).launcher(max_restarts=3) is None


def test_restarts_need_the_re_executing_launcher(reexecutable):
    assert isinstance(placed("single", ONE_CPU).launcher(max_restarts=2), ReexecLauncher)
    with pytest.raises(ConfigError, match=r"trainer\.max_restarts 2"):
        placed("ddp_spawn").launcher(max_restarts=2)


def test_an_interactive_session_forks_a_ddp_spawn_twin_with_the_same_settings(monkeypatch):
    from trainkit.distributed.launchers import reexec

    monkeypatch.setattr(reexec, "can_reexecute", lambda: False)
    ddp = select_strategy(
        ALIASES["ddp_find_unused_parameters_true"](),
        Placement(TWO_CPUS, 1, LoneEnvironment()),
    )
    launcher = ddp.launcher()
    assert isinstance(launcher, SpawnLauncher)
    assert isinstance(launcher.strategy, DDPSpawnStrategy)
    assert launcher.start_method == "fork"
    assert launcher.strategy.options == ddp.options
    with pytest.raises(ConfigError, match="max_restarts"):
        ddp.launcher(max_restarts=1)


def test_restarts_under_an_external_launcher_are_said_to_be_that_launchers(capsys):
    """Said once, by rank 0; trainkit's own ranks (which carry max_restarts too) say nothing."""
    torchrun = TorchElasticEnvironment(world_size=2, local_world_size=2)
    assert placed("ddp", cluster=torchrun).launcher(max_restarts=2) is None
    assert capsys.readouterr().err == (
        "trainkit: max_restarts 2 is not used under torchrun, which started the ranks: torchrun "
        "restarts them (torchrun --max-restarts N); a restarted job resumes from last.ckpt by "
        "itself\n"
    )
    rank_1 = OpenMPIEnvironment(world_size=2, global_rank=1, local_rank=1, local_world_size=2)
    own = TrainkitLauncherEnvironment(world_size=2, local_world_size=2)
    for cluster in (rank_1, own):
        assert placed("ddp", cluster=cluster).launcher(max_restarts=2) is None
    alone = TorchElasticEnvironment()  # torchrun --nproc-per-node 1
    assert placed("single", ONE_CPU, cluster=alone).launcher(max_restarts=0) is None
    assert capsys.readouterr().err == ""


def batchnorm_model():
    from torch import nn

    return nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4))


def test_sync_batchnorm_over_cpu_ranks_is_refused_before_they_start():
    strategy = select_strategy("ddp", Placement(TWO_CPUS, 1, LoneEnvironment(), "32", True))
    with pytest.raises(
        ConfigError, match=r"sync_batchnorm True; expected false on CPU .*CUDA only"
    ):
        strategy.check_module(batchnorm_model())
    strategy.check_module(batchnorm_model()[:1])  # no BatchNorm: nothing to synchronise


def test_sync_batchnorm_over_one_rank_keeps_plain_batchnorm():
    from torch import nn

    strategy = select_strategy("ddp", Placement(ONE_CPU, 1, LoneEnvironment(), "32", True))
    strategy.check_module(batchnorm_model())
    synced = strategy.with_batchnorm_synced(batchnorm_model())
    assert type(synced[1]) is nn.BatchNorm1d


def test_sharded_rebuilds_each_optimizer_with_the_arguments_its_class_takes():
    import torch

    from trainkit.strategies.sharded import constructor_defaults

    params = [torch.nn.Parameter(torch.zeros(2))]
    adamw = torch.optim.AdamW(params, lr=0.01, weight_decay=0.1)
    rebuilt = type(adamw)(params, **constructor_defaults(adamw))  # AdamW takes no decoupled_...
    assert rebuilt.defaults == adamw.defaults


@pytest.mark.parametrize(
    ("external", "world", "restarts", "reexecutable", "method", "start"),
    [
        (True, 4, 2, True, "popen", Start.HERE),  # torchrun, srun, mpirun, a pod started them
        (False, 1, 0, True, "popen", Start.HERE),  # the only rank
        (False, 1, 2, True, "spawn", Start.REEXEC),  # watched, to be restarted
        (False, 1, 2, False, "popen", Start.HERE),  # an interactive session cannot be re-run
        (False, 2, 0, True, "popen", Start.REEXEC),
        (False, 2, 0, True, "spawn", Start.SPAWN),
        (False, 2, 0, False, "popen", Start.FORK_TWIN),
    ],
)
def test_one_place_chooses_how_ranks_start_from_plain_numbers(
    external, world, restarts, reexecutable, method, start
):
    assert how_to_start(external, world, restarts, reexecutable, method, "ddp") is start


def test_restarts_of_ranks_not_started_by_re_running_are_one_line():
    with pytest.raises(ConfigError, match=r"max_restarts 1; expected 0 with strategy ddp_spawn \("):
        how_to_start(False, 2, 1, True, "spawn", "ddp_spawn")
    with pytest.raises(ConfigError, match=r"max_restarts 1; expected 0 with strategy ddp here"):
        how_to_start(False, 2, 1, False, "popen", "ddp")


def test_ddp_takes_lightnings_start_method_and_checks_it_when_connected():
    spawned = select_strategy(DDPStrategy(start_method="spawn"), Placement(TWO_CPUS))
    launcher = spawned.launcher()
    assert isinstance(launcher, SpawnLauncher) and launcher.start_method == "spawn"
    assert DDPStrategy().start_method == "popen"
    with pytest.raises(ConfigError, match=r"start_method 'thread'; expected one of popen, spawn"):
        select_strategy(DDPStrategy(start_method="thread"), Placement(TWO_CPUS))
