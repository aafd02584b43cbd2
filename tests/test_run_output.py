"""What a run tells its user: which checkpoint it loaded (resuming is checked by the README
tour test), a closing summary after fit, evaluations written beside the run they evaluate, a startup table that shows what
actually runs, and third-party warnings shown once."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
import yaml

from tests.helpers.models import Regression, regression_loader
from trainkit import Callback

FAST = ["--trainer.max_epochs", "2", "--data.init_args.num_samples", "512"]


def runs(root: Path) -> list[Path]:
    return sorted((root / "runs" / "autoencoder" / "trainkit_logs").glob("version_*"))


def test_evaluations_go_beside_the_run_they_evaluate(run_cli, autoencoder_config, tmp_path):
    fit = run_cli("fit", "-c", autoencoder_config, *FAST)
    assert fit.returncode == 0, fit.stderr
    assert "fit done in" in fit.stdout
    for line in ("best checkpoint", "last checkpoint", "logs", "tensorboard --logdir"):
        assert line in fit.stdout
    (run,) = runs(tmp_path)
    fit_config = (run / "config.yaml").read_text()

    for stage in ("validate", "test", "predict"):
        result = run_cli(stage, "-c", autoencoder_config, *FAST[2:], "--ckpt_path", "last")
        assert result.returncode == 0, result.stderr
        last = run.relative_to(tmp_path) / "checkpoints" / "last.ckpt"
        assert (
            f"trainkit: loaded {last}; evaluating the weights of epoch 1, step 14" in result.stdout
        )

    assert runs(tmp_path) == [run], "an evaluation started a run folder of its own"
    assert (run / "config.yaml").read_text() == fit_config
    assert yaml.safe_load((run / "config_test.yaml").read_text())["ckpt_path"] == "last"
    assert (run / "predictions.pt").is_file()
    rows = list(csv.DictReader((run / "metrics.csv").open()))
    assert any(row.get("epoch") == "0" for row in rows), "the fit's rows were lost"
    evaluated = [row for row in rows if row.get("test_loss")]
    assert [row["step"] for row in evaluated] == ["14"]  # at the step the weights reached


def test_the_startup_table_shows_what_runs_next_to_what_was_asked(run_cli, autoencoder_config):
    """Two devices asked, one process runs them (dp); the README tour checks ddp's 2 processes."""
    dp = run_cli(
        "fit", "-c", autoencoder_config, *FAST, "--trainer.devices", "2", "--trainer.strategy", "dp"
    )
    assert dp.returncode == 0, dp.stderr
    assert "dp (one process; each batch split over 2 devices)" in dp.stdout
    assert "devices                    2 batch chunks in one process" in dp.stdout
    assert "processes per node         1" in dp.stdout


def test_the_deepspeed_stage_is_named():
    from trainkit.strategies import DeepSpeedStrategy

    described = DeepSpeedStrategy.preset("deepspeed_stage_3_offload").describe()
    assert described.startswith("deepspeed (ZeRO stage 3") and "offloaded to CPU" in described
    assert DeepSpeedStrategy.preset("deepspeed_stage_2").describe() == "deepspeed (ZeRO stage 2)"


def test_a_warning_repeated_every_step_is_shown_once(run_cli, autoencoder_config):
    result = run_cli(
        "fit", "-c", autoencoder_config, *FAST, "--model", "tests.helpers.models.Noisy"
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr.count("FutureWarning: old_api is deprecated") == 1


class EvalTotals(Callback):
    def __init__(self):
        self.totals = []

    def on_validation_epoch_start(self, trainer, module):
        self.totals.append(trainer.num_eval_batches)


@pytest.mark.parametrize("limit", [2, 3])
def test_the_validation_total_is_known_when_validation_starts(make_trainer, limit):
    probe = EvalTotals()
    trainer = make_trainer(max_epochs=2, limit_val_batches=limit, callbacks=[probe])
    trainer.fit(Regression(), regression_loader(), regression_loader())
    assert probe.totals and set(probe.totals) == {limit}
