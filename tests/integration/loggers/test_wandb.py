"""WandbLogger in offline mode (WANDB_MODE=offline, no network) with wandb's own service (the
wandb-core daemon a run starts): the run files wandb writes to disk are read back for the
config, metrics with their steps, watched gradients and checkpoint artifacts."""

from __future__ import annotations

import json

import pytest

from tests.helpers.models import Regression, regression_loader
from tests.helpers.wandb_runs import offline_runs
from trainkit import ModelCheckpoint, Trainer
from trainkit.loggers import WandbLogger

pytest.importorskip("wandb", reason="needs wandb: pip install 'trainkit[wandb]'")


@pytest.fixture(scope="module", autouse=True)
def wandb_service():
    """wandb's background service (started by the first run) ends with this module."""
    yield
    import wandb

    wandb.teardown()


@pytest.fixture(autouse=True)
def offline(tmp_path, monkeypatch):
    """No network, and wandb's caches and settings inside the test's folder."""
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    for name in ("WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR", "WANDB_ARTIFACT_DIR"):
        monkeypatch.setenv(name, str(tmp_path / "wandb_home"))


def fit(tmp_path, logger, epochs=2):
    trainer = Trainer(
        accelerator="cpu",
        max_epochs=epochs,
        log_every_n_steps=2,
        default_root_dir=str(tmp_path),
        logger=logger,
        callbacks=[ModelCheckpoint()],
        enable_progress_bar=False,
    )
    module = Regression(lr=0.03)
    logger.watch(module, log="all", log_freq=4)
    trainer.fit(module, regression_loader(), regression_loader(n=16))
    return trainer


def test_offline_run_holds_config_metrics_gradients_and_every_checkpoint(tmp_path):
    logger = WandbLogger(name="first", project="regression", save_dir=str(tmp_path),
                         log_model="all", prefix="a", tags=["smoke"])  # fmt: skip
    trainer = fit(tmp_path, logger)
    (run,) = offline_runs(tmp_path)
    assert run.info.run_id == logger.version and run.info.project == "regression"
    assert run.info.display_name == "first"
    assert list(run.info.tags) == ["smoke"]  # a wandb.init keyword, passed through
    assert run.config["lr"] == 0.03 and run.config["features"] == 4 and "run/devices" in run.config
    # every 2nd batch, at the batches stepped before it (Lightning's axis)
    assert [step for step, _ in run.metric("a-train_loss")] == [1, 3, 5, 7, 9, 11, 13, 15]
    (_, first_val), (_, last_val) = run.metric("a-val_loss")
    assert last_val == pytest.approx(trainer.callback_metrics["val_loss"].item())
    assert last_val < first_val
    assert [s for s, _ in run.metric("gradients/layer.weight/values")] == [3, 7, 11, 15]  # watch()
    assert run.exit_code == 0
    # 'all': each save uploaded as a new version of model-<run id>: epoch 0, last, epoch 1, last
    assert [a.name for a in run.artifacts] == [f"model-{logger.version}"] * 4
    assert list(run.artifacts[-1].aliases) == ["latest"]
    assert sorted(run.artifacts[-2].aliases) == ["best", "latest"]
    folder = tmp_path / "regression" / logger.version  # the run folder: save_dir/project/run id
    assert trainer.log_dir == str(folder) and (folder / "checkpoints" / "last.ckpt").is_file()


def test_log_model_true_uploads_best_and_last_once_at_the_end(tmp_path):
    logger = WandbLogger(project="regression", save_dir=str(tmp_path), log_model=True,
                         checkpoint_name="regression-model")  # fmt: skip
    fit(tmp_path, logger)
    (run,) = offline_runs(tmp_path)
    assert [a.name for a in run.artifacts] == ["regression-model"] * 2
    assert [sorted(a.aliases) for a in run.artifacts] == [["best", "latest"], ["latest"]]
    assert [json.loads(a.metadata)["original_filename"] for a in run.artifacts] == [
        "epoch=1-step=16.ckpt",
        "last.ckpt",
    ]
