"""Bad pipeline settings fail in the parent, in one line, before any rank starts."""

from __future__ import annotations

import sys

import pytest

from tests.helpers.command_env import REPO

CONFIG = str(REPO / "configs" / "pipeline.yaml")


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--trainer.strategy.init_args.balance", "[2,2]"], "covers 4"),
        (["--trainer.devices", "3"], "one stage per rank (3 ranks)"),
        (["--model", "trainkit.demos.autoencoder.AutoEncoder"], "sequential_module"),
    ],
)
def test_bad_pipeline_settings_fail_before_any_rank_starts(
    tmp_path, capsys, monkeypatch, args, named
):
    from trainkit.cli import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["trainkit"])
    exit_code = main(["fit", "-c", CONFIG, *args, "--trainer.default_root_dir", str(tmp_path)])
    err = capsys.readouterr().err
    assert exit_code == 2, err
    assert named in err and len(err.strip().splitlines()) == 1
    assert not list(tmp_path.glob("trainkit_logs/version_*")), "a rank started"
