"""Sequential model parallel over 2 and 4 CPU stages matches the unsplit model."""

from __future__ import annotations

import csv

import pytest
import torch

from tests.conftest import REPO

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
]


def run(start_cli, root, *args):
    proc = start_cli("fit", "-c", CONFIG, *COMMON, *args, root=root)
    out, err = proc.communicate(timeout=150)
    assert proc.returncode == 0, err
    version = next(root.glob("trainkit_logs/version_*"))
    losses = [
        float(r["train_loss"])
        for r in csv.DictReader((version / "metrics.csv").open())
        if r.get("train_loss")
    ]
    weights = torch.load(version / "checkpoints" / "last.ckpt", weights_only=True)["state_dict"]
    return losses, weights, out


@pytest.mark.timeout(170)
@pytest.mark.parametrize(
    ("devices", "balance", "schedule"), [(2, "[3,3]", "gpipe"), (4, "[2,1,2,1]", "1f1b")]
)
def test_pipeline_matches_the_unsplit_model(start_cli, tmp_path, devices, balance, schedule):
    reference_losses, reference, _ = run(
        start_cli, tmp_path / "single", "--trainer.devices", "1", "--trainer.strategy", "single"
    )
    losses, weights, out = run(
        start_cli,
        tmp_path / "pipe",
        "--trainer.devices",
        str(devices),
        "--trainer.strategy.init_args.balance",
        balance,
        "--trainer.strategy.init_args.schedule",
        schedule,
    )
    assert len(losses) == len(reference_losses) == 56
    assert losses == pytest.approx(reference_losses, rel=1e-4, abs=1e-6)
    assert set(weights) == set(reference)  # checkpoints hold every stage's layers
    for key, value in reference.items():
        torch.testing.assert_close(weights[key], value, rtol=1e-4, atol=1e-5)
    assert "val_loss=" in out
    import re

    assert re.search(r"effective batch\s+64\b", out)


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--trainer.strategy.init_args.balance", "[2,2]"], "covers 4"),
        (["--trainer.devices", "3"], "one stage per rank (3 ranks)"),
        (["--model", "trainkit.demos.autoencoder.AutoEncoder"], "sequential_module"),
    ],
)
def test_bad_pipeline_settings_fail_before_any_rank_starts(run_cli, tmp_path, args, named):
    result = run_cli(
        "fit",
        "-c",
        CONFIG,
        *args,
        "--trainer.default_root_dir",
        str(tmp_path),
        timeout=60,
    )
    assert result.returncode == 2, result.stderr
    assert named in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
