"""DeviceStatsMonitor: the device's statistics reach the loggers; it needs one."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from tests.helpers.models import Regression, regression_loader
from trainkit import CSVLogger
from trainkit.callbacks import DeviceStatsMonitor
from trainkit.errors import MisconfigurationError


def test_device_stats_reach_the_loggers(make_trainer, tmp_path):
    logger = CSVLogger(tmp_path)
    trainer = make_trainer(
        max_steps=4,
        logger=logger,
        log_every_n_steps=2,
        callbacks=[DeviceStatsMonitor(cpu_stats=True)],
    )
    trainer.fit(Regression(), regression_loader())
    with (Path(logger.log_dir) / "metrics.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    column = "DeviceStatsMonitor.on_train_batch_start/cpu_percent"
    logged = [row["step"] for row in rows if row.get(column)]
    assert logged and all(int(step) % 2 == 0 for step in logged)
    assert any(row.get("DeviceStatsMonitor.on_train_batch_end/cpu_vm_percent") for row in rows)


def test_device_stats_need_a_logger(make_trainer):
    with pytest.raises(MisconfigurationError, match="needs a logger"):
        make_trainer(max_steps=1, callbacks=[DeviceStatsMonitor()]).fit(
            Regression(), regression_loader()
        )
