"""MLFlowLogger against a real MLflow tracking server (started once for this module) and local
stores, read back with ``mlflow.MlflowClient``: params, metrics with their steps, checkpoints
as artifacts, run status; from Python and from a YAML config by short class name."""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.helpers.command_env import cli_env
from tests.helpers.mlflow_server import mlflow_server
from tests.helpers.models import Regression, regression_loader
from tests.unit.test_compat_doc import documented_arguments
from trainkit import ModelCheckpoint, Trainer
from trainkit.errors import ConfigError
from trainkit.loggers import MLFlowLogger

mlflow = pytest.importorskip("mlflow", reason="needs mlflow: pip install 'trainkit[mlflow]'")
pytestmark = pytest.mark.slow  # every test here talks to a real MLflow server it starts


@pytest.fixture(scope="module", autouse=True)
def booting_server(tmp_path_factory):
    """An ``mlflow server`` (SQLite store, local artifacts) started with the module's first
    test: the local-store tests below run while it boots."""
    with mlflow_server(tmp_path_factory.mktemp("mlflow_server")) as booting:
        yield booting


@pytest.fixture
def server(booting_server) -> str:
    """The running server's URL."""
    return booting_server.url


def fit(tmp_path, logger, epochs=2, module=None):
    trainer = Trainer(
        accelerator="cpu",
        max_epochs=epochs,
        log_every_n_steps=2,
        default_root_dir=str(tmp_path),
        logger=logger,
        callbacks=[ModelCheckpoint()],
        enable_progress_bar=False,
    )
    trainer.fit(module or Regression(lr=0.03), regression_loader(), regression_loader(n=16))
    return trainer


def artifacts(client, run_id: str, path: str = "") -> set[str]:
    """Every artifact file of the run, as paths relative to its root."""
    found = set()
    for item in client.list_artifacts(run_id, path or None):
        found |= artifacts(client, run_id, item.path) if item.is_dir else {item.path}
    return found


def test_yaml_logger_list_by_short_class_name_and_the_default_store(
    run_main, autoencoder_config, tmp_path
):
    config = tmp_path / "loggers.yaml"
    config.write_text(
        "trainer:\n  logger:\n"
        "    - class_path: MLFlowLogger\n"
        "      init_args: {experiment_name: cli, run_name: tour, log_model: true}\n"
        "    - class_path: trainkit.loggers.CSVLogger\n      init_args: {save_dir: csv}\n"
    )
    result = run_main(
        "fit", "-c", autoencoder_config, "-c", str(config), "--trainer.max_epochs", "1",
        "--data.init_args.num_samples", "256",
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    # no tracking_uri: an SQLite store in save_dir (./mlruns), artifacts beside each run folder
    client = mlflow.MlflowClient(f"sqlite:///{tmp_path / 'mlruns' / 'mlflow.db'}")
    (run,) = client.search_runs([client.get_experiment_by_name("cli").experiment_id])
    assert run.info.status == "FINISHED" and run.info.run_name == "tour"
    assert run.data.params["hidden"] == "64" and run.data.params["batch_size"] == "64"
    # at the step of the epoch's last batch (Lightning's axis)
    assert [m.step for m in client.get_metric_history(run.info.run_id, "val_loss")] == [3]
    run_folder = tmp_path / "mlruns" / "cli" / run.info.run_id
    assert run.info.artifact_uri == (run_folder / "artifacts").as_uri()
    uploaded = artifacts(client, run.info.run_id)
    assert {"config.yaml", "hparams.yaml", "model/checkpoints/last/last.ckpt"} <= uploaded
    assert "MLFlowLogger" in (run_folder / "artifacts" / "config.yaml").read_text()  # resolved
    # MLflow came first: its run folder is the run's folder, and the CSV logger shares its version
    assert (run_folder / "checkpoints" / "last.ckpt").is_file()
    assert (tmp_path / "csv" / "trainkit_logs" / run.info.run_id / "metrics.csv").is_file()


def test_file_store_and_an_existing_run(tmp_path, monkeypatch):
    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # MLflow 3 keeps file stores behind this
    uri = (tmp_path / "store").as_uri()
    first = MLFlowLogger(experiment_name="files", tracking_uri=uri)
    first.log_hyperparams({"optimizer": {"name": "adam", "betas": [0.9, 0.99]}})
    first.log_metrics({"loss": 1.0}, step=3)
    first.finalize("failed")
    again = MLFlowLogger(tracking_uri=uri, run_id=first.run_id, synchronous=True)
    again.log_hyperparams({"optimizer": {"name": "sgd"}, "seed": 7})  # a resumed fit's params
    again.log_metrics({"loss": 0.5}, step=7)
    again.finalize("success")
    client = mlflow.MlflowClient(uri)
    run = client.get_run(first.run_id)
    assert run.data.params == {
        "optimizer/name": "adam",  # kept: MLflow refuses to change a param
        "optimizer/betas": "[0.9, 0.99]",
        "seed": "7",
    }
    assert [(m.step, m.value) for m in client.get_metric_history(first.run_id, "loss")] == [
        (3, 1.0),
        (7, 0.5),
    ]
    assert run.info.status == "FINISHED" and again.experiment_id == first.experiment_id


def test_arguments_match_the_compat_page_and_bad_values_are_one_line(monkeypatch):
    signature = [p for p in inspect.signature(MLFlowLogger.__init__).parameters if p != "self"]
    assert documented_arguments("MLFlowLogger") == signature
    with pytest.raises(ConfigError, match=r"log_model 'best'; expected false, true or 'all'"):
        MLFlowLogger(log_model="best")
    monkeypatch.setitem(sys.modules, "mlflow", None)  # as if mlflow were not installed
    with pytest.raises(ConfigError, match=r"^trainer.logger 'MLFlowLogger'; expected the mlflow "
                       r"package installed; pip install 'trainkit\[mlflow\]'$"):  # fmt: skip
        MLFlowLogger().log_metrics({"loss": 1.0}, step=0)


def test_params_metrics_with_steps_and_every_checkpoint_reach_the_server(server, tmp_path):
    logger = MLFlowLogger(
        experiment_name="regression", run_name="first", tracking_uri=server,
        tags={"team": "vision"}, save_dir=str(tmp_path / "runs"), log_model="all", prefix="a",
    )  # fmt: skip
    trainer = fit(tmp_path, logger)
    client = mlflow.MlflowClient(server)
    run = client.get_run(logger.run_id)
    assert run.info.status == "FINISHED" and run.info.run_name == "first"
    assert run.data.tags["team"] == "vision"
    assert run.info.experiment_id == logger.experiment_id == logger.name
    assert run.data.params["lr"] == "0.03" and run.data.params["features"] == "4"
    assert "run/devices" in run.data.params  # the startup table, as for every logger
    train = client.get_metric_history(logger.run_id, "a-train_loss")
    # 8 steps an epoch, every 2nd, at the batches stepped before it (Lightning's axis)
    assert [m.step for m in train] == [1, 3, 5, 7, 9, 11, 13, 15]
    val = client.get_metric_history(logger.run_id, "a-val_loss")
    assert [m.step for m in val] == [7, 15]
    assert val[-1].value == pytest.approx(trainer.callback_metrics["val_loss"].item())
    # 'all': every checkpoint as it was saved, including epoch 0's that top-1 later deleted
    assert artifacts(client, logger.run_id) == {
        "model/checkpoints/epoch=0-step=8/epoch=0-step=8.ckpt",
        "model/checkpoints/epoch=1-step=16/epoch=1-step=16.ckpt",
        "model/checkpoints/last/last.ckpt",
        "hparams.yaml",  # the run folder's, uploaded at the end
    }
    # the local run folder: save_dir/experiment/run id, where ModelCheckpoint saved
    assert Path(trainer.log_dir) == tmp_path / "runs" / "regression" / logger.run_id
    assert (Path(trainer.log_dir) / "checkpoints" / "last.ckpt").is_file()
    assert logger.version == logger.run_id and logger.save_dir == str(tmp_path / "runs")


def lightning_linear():
    """A one-layer regression written against Lightning (imported only where it is)."""
    import lightning.pytorch as pl

    class LightningLinear(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.layer = torch.nn.Linear(4, 1)

        def training_step(self, batch, batch_idx):
            x, y = batch
            return torch.nn.functional.mse_loss(self.layer(x), y)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    return LightningLinear()


def test_with_a_server_and_no_save_dir_the_run_folder_is_lightnings(server, tmp_path, monkeypatch):
    """A remote store and save_dir left at its default: checkpoints and config go to
    default_root_dir/<experiment id>/<run id>/, where Lightning's ModelCheckpoint puts them,
    and nothing to ./mlruns in the folder the program runs in."""
    monkeypatch.chdir(tmp_path)
    logger = MLFlowLogger(experiment_name="remote", tracking_uri=server)
    trainer = fit(tmp_path / "root", logger)
    run = tmp_path / "root" / logger.experiment_id / logger.run_id
    assert Path(trainer.log_dir) == run and logger.save_dir is None
    assert (run / "checkpoints" / "last.ckpt").is_file()
    assert not (tmp_path / "mlruns").exists()
    lightning = pytest.importorskip("lightning.pytorch", reason="Lightning compares the folder")
    from lightning.pytorch.loggers import MLFlowLogger as LightningMLFlowLogger

    theirs = LightningMLFlowLogger(experiment_name="remote", tracking_uri=server)
    checkpoint = lightning.callbacks.ModelCheckpoint()
    their_trainer = lightning.Trainer(
        max_epochs=1, logger=theirs, callbacks=[checkpoint], default_root_dir=str(tmp_path / "pl"),
        enable_progress_bar=False, enable_model_summary=False,
    )  # fmt: skip
    their_trainer.fit(lightning_linear(), regression_loader())
    assert Path(checkpoint.dirpath) == tmp_path / "pl" / theirs.experiment_id / theirs.run_id / (
        "checkpoints"
    )


def test_log_model_true_uploads_best_and_last_at_the_end(server, tmp_path):
    logger = MLFlowLogger(experiment_name="regression", tracking_uri=server, log_model=True,
                          save_dir=str(tmp_path))  # fmt: skip
    trainer = fit(tmp_path, logger)
    client = mlflow.MlflowClient(server)
    saved = {p.name for p in (Path(trainer.log_dir) / "checkpoints").iterdir()}
    assert saved == {"epoch=1-step=16.ckpt", "last.ckpt"}
    uploaded = artifacts(client, logger.run_id)
    assert {Path(p).name for p in uploaded if p.startswith("model/")} == saved
    best = client.download_artifacts(
        logger.run_id, "model/checkpoints/epoch=1-step=16/epoch=1-step=16.ckpt", str(tmp_path)
    )
    assert torch.load(best, weights_only=True)["global_step"] == 16


class Crashes(Regression):
    def training_step(self, batch, batch_idx):
        if self.global_step == 3:
            raise RuntimeError("boom")
        return super().training_step(batch, batch_idx)


def test_a_run_that_raises_ends_failed(server, tmp_path):
    logger = MLFlowLogger(experiment_name="crashes", tracking_uri=server, save_dir=str(tmp_path))
    with pytest.raises(RuntimeError, match="boom"):
        fit(tmp_path, logger, module=Crashes())
    client = mlflow.MlflowClient(server)
    assert client.get_run(logger.run_id).info.status == "FAILED"
    assert [m.step for m in client.get_metric_history(logger.run_id, "train_loss")] == [1]


def test_import_and_construction_load_neither_mlflow_nor_wandb(tmp_path):
    code = (
        "import sys, trainkit\n"
        "from trainkit import MLFlowLogger, WandbLogger\n"
        f"MLFlowLogger(save_dir={str(tmp_path)!r}), WandbLogger(save_dir={str(tmp_path)!r})\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'mlflow', 'wandb', 'torch'}))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            timeout=120, env=cli_env(), check=True)  # fmt: skip
    assert result.stdout.strip() == "[]"
