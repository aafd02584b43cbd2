"""Effective batch arithmetic, LR scaling rules, batch_size_mode, and the startup table."""

from __future__ import annotations

import math
import re
import warnings

import pytest
import torch

from tests.helpers.models import Regression, regression_loader
from trainkit.errors import ConfigError
from trainkit.scaling import effective_batch_size, lr_factor, per_device_batch
from trainkit.strategies import STRATEGIES


@pytest.mark.parametrize(
    ("strategy", "expected"),
    [
        ("ddp", 8 * 4 * 2 * 3),
        ("ddp_spawn", 8 * 4 * 2 * 3),
        ("fsdp", 8 * 4 * 2 * 3),
        ("ddp_sharded", 8 * 4 * 2 * 3),
        ("deepspeed", 8 * 4 * 2 * 3),
        ("dp", 8 * 2 * 3),
        ("ddp2", 8 * 2 * 3),
    ],
)
def test_effective_batch_per_strategy_family(strategy, expected):
    assert (
        effective_batch_size(
            8, devices=4, num_nodes=2, accumulate=3, loading=STRATEGIES[strategy].batch_loading
        )
        == expected
    )


def test_lr_factors():
    assert lr_factor("none", 512, None) == 1.0
    assert lr_factor("linear", 512, 64) == 8.0
    assert lr_factor("sqrt", 512, 64) == pytest.approx(math.sqrt(8))
    with pytest.raises(ConfigError, match="reference_batch_size None"):
        lr_factor("linear", 512, None)
    with pytest.raises(ConfigError, match="'cubic'"):
        lr_factor("cubic", 512, 64)


def test_effective_batch_size_mode_divides_and_names_the_numbers():
    assert per_device_batch(128, 8, "effective") == 16
    assert per_device_batch(128, 8, "per_device") == 128
    with pytest.raises(
        ConfigError, match=r"batch_size 100; expected a multiple of the world size 8.*96 or 104"
    ):
        per_device_batch(100, 8, "effective")


def test_an_effective_batch_includes_the_accumulated_batches():
    """``batch_size: 128`` with ``effective`` is the startup table's effective batch: the samples
    of one optimizer step, over the ranks and the batches accumulated per step."""
    assert per_device_batch(128, 4, "effective", accumulate=2) == 16
    assert per_device_batch(128, 4, "per_device", accumulate=2) == 128
    with pytest.raises(
        ConfigError, match=r"world size 4 x accumulate_grad_batches 3 = 12.*120 or 132"
    ):
        per_device_batch(128, 4, "effective", accumulate=3)


def test_the_startup_table_shows_the_effective_batch_asked_for(make_trainer, capsys):
    trainer = make_trainer(
        batch_size_mode="effective", accumulate_grad_batches=2, enable_progress_bar=True
    )
    trainer.fit(Regression(), regression_loader(batch_size=8))
    table = capsys.readouterr().out
    assert re.search(r"effective batch\s+8\b", table) and re.search(
        r"batch per device\s+4\b", table
    )


@pytest.mark.parametrize(("rule", "factor"), [("none", 1.0), ("linear", 4.0), ("sqrt", 2.0)])
def test_rules_scale_optimizer_and_scheduler_lrs_once(make_trainer, rule, factor):
    class WithScheduler(Regression):
        def configure_optimizers(self):
            opt = torch.optim.SGD(self.parameters(), lr=0.1)
            return {"optimizer": opt, "lr_scheduler": torch.optim.lr_scheduler.StepLR(opt, 1, 0.5)}

    trainer = make_trainer(
        max_epochs=2, lr_scaling=rule, reference_batch_size=2 if rule != "none" else None
    )
    trainer.fit(WithScheduler(), regression_loader(batch_size=8))
    assert trainer.effective_batch_size == 8
    assert trainer.lr_scheduler_configs[0].scheduler.base_lrs == [pytest.approx(0.1 * factor)]
    assert trainer.optimizers[0].param_groups[0]["lr"] == pytest.approx(0.1 * factor * 0.25)
    assert trainer.run_summary.final_lr == pytest.approx(0.1 * factor)


def test_startup_table_lists_every_number(make_trainer, capsys):
    trainer = make_trainer(
        max_epochs=3,
        enable_progress_bar=True,
        accumulate_grad_batches=2,
        lr_scaling="linear",
        reference_batch_size=4,
    )
    trainer.fit(Regression(lr=0.05), regression_loader(n=64, batch_size=8))
    out = capsys.readouterr().out
    table = {}
    for line in out.split("training configuration", 1)[1].splitlines()[1:21]:
        name, _, value = line.strip().rpartition("  ")
        table[name.strip()] = value.strip()
    assert table["effective batch"] == "16" and table["batch per device"] == "8"
    assert (
        table["lr scaling"] == "linear (x4)"
        and table["final lr"] == "0.2"
        and table["configured lr"] == "0.05"
    )
    assert table["optimizer steps per epoch"] == "4" and table["total optimizer steps"] == "12"
    assert (
        table["samples per epoch"] == "64"
        and table["world size"] == "1"
        and table["strategy"] == "single"
    )


@pytest.mark.parametrize("strategy_class", ["DDPStrategy", "FSDPStrategy", "DeepSpeedStrategy"])
def test_batchnorm_over_ranks_warns_and_sync_batchnorm_converts(strategy_class):
    """Every strategy that gives each rank its own batch says that BatchNorm normalises per rank,
    naming itself and the setting; ``sync_batchnorm`` converts the layers instead."""
    from trainkit import strategies
    from trainkit.devices import DeviceSelection
    from trainkit.distributed.environments import TrainkitLauncherEnvironment
    from trainkit.strategies import Placement

    def strategy_for(sync_batchnorm: bool):
        strategy = getattr(strategies, strategy_class)()
        strategy.connect(
            Placement(
                DeviceSelection("cpu", (0, 1)),
                1,
                TrainkitLauncherEnvironment(world_size=2),
                sync_batchnorm=sync_batchnorm,
            )
        )
        return strategy

    model = torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.BatchNorm1d(2))
    warned = strategy_for(sync_batchnorm=False)
    with pytest.warns(UserWarning, match=f"BatchNorm under {warned.name} .*sync_batchnorm: true"):
        assert warned.with_batchnorm_synced(model) is model
    converted = strategy_for(sync_batchnorm=True).with_batchnorm_synced(model)
    assert isinstance(converted[1], torch.nn.SyncBatchNorm)
    plain = torch.nn.Sequential(torch.nn.Linear(2, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert strategy_for(sync_batchnorm=False).with_batchnorm_synced(plain) is plain


def test_the_table_shows_the_configured_lr_and_where_a_scheduler_starts(make_trainer):
    """OneCycleLR moves the groups' lr to max_lr / div_factor when it is built: the table said
    'configured lr 0.00012' for a config of 0.003; it now shows both."""

    class OneCycle(Regression):
        def configure_optimizers(self):
            opt = torch.optim.SGD(self.parameters(), lr=0.003)
            cycle = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.003, total_steps=100)
            return {"optimizer": opt, "lr_scheduler": cycle}

    trainer = make_trainer(max_epochs=1)
    trainer.fit(OneCycle(), regression_loader(batch_size=8))
    rows = dict(trainer.run_summary.rows())
    assert rows["configured lr"] == "0.003" and rows["final lr"] == "0.003"
    assert rows["lr at the first step"] == "0.00012"  # 0.003 / 25, OneCycleLR's start
    trainer = make_trainer(max_epochs=1)
    trainer.fit(Regression(lr=0.05), regression_loader(batch_size=8))
    assert "lr at the first step" not in dict(trainer.run_summary.rows())  # starts where set
