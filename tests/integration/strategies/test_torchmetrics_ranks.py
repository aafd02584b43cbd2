"""torchmetrics objects logged on 2 gloo ranks: each rank updates with its shard, the epoch
value is the metric's own synced compute(), equal to the metric over the whole validation set."""

from __future__ import annotations

import json

import pytest

from tests.helpers.command_env import cli_env

CONFIG = """
seed_everything: 0
model:
  class_path: tests.helpers.metric_models.MetricClassifier
data:
  class_path: tests.helpers.metric_models.Blobs
  init_args:
    val_samples: 200
trainer:
  max_epochs: 2
  enable_progress_bar: false
  callbacks:
    - class_path: tests.helpers.metric_models.ScoreProbe
      init_args:
        path: {path}
"""


@pytest.mark.timeout(180)
def test_synced_epoch_metrics_equal_the_whole_dataset_metric(run_main, tmp_path, no_leftovers):
    devices = 2  # one process is checked in-process by tests/unit/test_metrics.py
    scores = tmp_path / "scores.json"
    config = tmp_path / "config.yaml"
    config.write_text(CONFIG.format(path=scores))
    done = run_main(
        "fit", "-c", str(config), "--trainer.devices", str(devices),
        "--trainer.default_root_dir", str(tmp_path), env=cli_env(),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    record = json.loads(scores.read_text())
    assert record["world"] == devices
    for name in ("val_acc", "val_f1"):
        assert record["logged"][name] == pytest.approx(record["reference"][name], abs=1e-6)
