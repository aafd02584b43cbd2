"""Sequential model parallel over 2 and 4 CPU stages matches the unsplit model."""

from __future__ import annotations

import csv
import re

import pytest
import torch

from tests.helpers.command_env import REPO, cli_env

CONFIG = str(REPO / "configs" / "pipeline.yaml")
COMMON = [
    "--trainer.max_epochs",
    "2",
    "--trainer.num_sanity_val_steps",
    "0",
    "--optimizer",
    "SGD",
    "--optimizer.lr",
    "0.05",
    "--trainer.log_every_n_steps",
    "1",
    "--data.init_args.num_samples",
    "1024",  # 14 steps per epoch
]


# both tests compare with one run of the unsplit model, so they share one pytest-xdist worker
pytestmark = pytest.mark.xdist_group("pipeline")
SINGLE = ["--trainer.devices", "1", "--trainer.strategy", "single"]


def read_run(root):
    """The logged training losses and the last checkpoint's weights of the run under ``root``."""
    version = next(root.glob("trainkit_logs/version_*"))
    losses = [
        float(r["train_loss"])
        for r in csv.DictReader((version / "metrics.csv").open())
        if r.get("train_loss")
    ]
    weights = torch.load(version / "checkpoints" / "last.ckpt", weights_only=True)["state_dict"]
    return losses, weights


@pytest.fixture(scope="module")
def unsplit_runs() -> dict:
    """The unsplit run's results, once it ran (the first test that needs them runs it)."""
    return {}


@pytest.fixture
def unsplit(unsplit_runs, tmp_path_factory, run_main):
    """Losses and weights of the same model trained on one device, run once for both tests."""
    if not unsplit_runs:
        root = tmp_path_factory.mktemp("unsplit")
        done = run_main(
            "fit", "-c", CONFIG, *COMMON, *SINGLE, "--trainer.default_root_dir", str(root),
            env=cli_env(),
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        unsplit_runs["run"] = read_run(root)
    return unsplit_runs["run"]


@pytest.mark.timeout(170)
@pytest.mark.parametrize(
    ("devices", "balance", "schedule"), [(2, "[3,3]", "gpipe"), (4, "[2,1,2,1]", "1f1b")]
)
def test_pipeline_matches_the_unsplit_model(
    run_main, tmp_path, no_leftovers, unsplit, devices, balance, schedule
):
    reference_losses, reference = unsplit
    done = run_main(
        "fit",
        "-c",
        CONFIG,
        *COMMON,
        "--trainer.devices",
        str(devices),
        "--trainer.strategy.init_args.balance",
        balance,
        "--trainer.strategy.init_args.schedule",
        schedule,
        "--trainer.default_root_dir",
        str(tmp_path),
        env=cli_env(),
    )
    out = done.stdout
    assert done.returncode == 0, done.stderr
    losses, weights = read_run(tmp_path)
    assert len(losses) == len(reference_losses) == 28
    assert losses == pytest.approx(reference_losses, rel=1e-4, abs=1e-6)
    assert set(weights) == set(reference)  # checkpoints hold every stage's layers
    for key, value in reference.items():
        torch.testing.assert_close(weights[key], value, rtol=1e-4, atol=1e-5)
    assert "val_loss=" in out
    assert re.search(r"effective batch\s+64\b", out)
