"""A dry run of two ranks, as the command line starts them: each rank is measured."""

from __future__ import annotations

import re


def test_a_dry_run_of_two_ranks_measures_both_and_writes_nothing(
    run_main, autoencoder_config, tmp_path
):
    ok = run_main("fit", "-c", autoencoder_config, "--dry_run", "--trainer.devices", "2")
    assert ok.returncode == 0, ok.stderr
    assert re.search(r"\n +1 +[\d,]+ MiB RSS", ok.stdout), ok.stdout  # both ranks measured
    assert not list(tmp_path.rglob("*.ckpt")) and not list(tmp_path.rglob("config.yaml"))
