"""MLFlowLogger and WandbLogger on 2 gloo ranks: rank 0 alone starts and logs each run, and
every rank saves checkpoints into the one run folder rank 0 picked (save_dir/experiment/run id)."""

from __future__ import annotations

import pytest

from tests.helpers.command_env import REPO, cli_env

mlflow = pytest.importorskip("mlflow", reason="needs mlflow: pip install 'trainkit[mlflow]'")
pytest.importorskip("wandb", reason="needs wandb: pip install 'trainkit[wandb]'")

LOGGERS = """
trainer:
  max_epochs: 2
  enable_progress_bar: false
  logger:
    - class_path: MLFlowLogger
      init_args: {experiment_name: ranks, tracking_uri: file:./store}
    - class_path: WandbLogger
      init_args: {project: ranks, save_dir: wandb_runs, offline: true}
      dict_kwargs: {tags: [two-ranks]}
"""


@pytest.mark.timeout(240)
def test_rank_zero_logs_one_run_and_every_rank_agrees_on_its_folder(
    run_main, tmp_path, monkeypatch, no_leftovers
):
    from tests.helpers.wandb_runs import offline_runs

    monkeypatch.setenv("MLFLOW_ALLOW_FILE_STORE", "true")  # a file store: no database to create
    config = tmp_path / "loggers.yaml"
    config.write_text(LOGGERS)
    home = tmp_path / "wandb_home"  # wandb's settings and temp files stay in the test's folder
    home.mkdir()
    env = cli_env(WANDB_SILENT="true", WANDB_CONFIG_DIR=str(home), TMPDIR=str(home))
    done = run_main(
        "fit", "-c", str(REPO / "configs" / "autoencoder.yaml"), "-c", str(config),
        "--trainer.devices", "2", "--data.init_args.num_samples", "256",
        "--trainer.default_root_dir", str(tmp_path), env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    client = mlflow.MlflowClient((tmp_path / "store").as_uri())
    (run,) = client.search_runs([client.get_experiment_by_name("ranks").experiment_id])
    assert run.info.status == "FINISHED" and run.data.params["run/world_size"] == "2"
    # at the last training step before each validation, counted from 0 (Lightning's steps)
    assert [m.step for m in client.get_metric_history(run.info.run_id, "val_loss")] == [1, 3]
    folders = list((tmp_path / "mlruns" / "ranks").iterdir())
    assert folders == [tmp_path / "mlruns" / "ranks" / run.info.run_id]
    assert (folders[0] / "checkpoints" / "last.ckpt").is_file()
    (wandb_run,) = offline_runs(tmp_path / "wandb_runs")
    assert [step for step, _ in wandb_run.metric("val_loss")] == [1, 3]
    assert wandb_run.config["run/world_size"] == "2" and list(wandb_run.info.tags) == ["two-ranks"]
