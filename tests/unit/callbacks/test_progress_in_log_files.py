"""Output meant for a log file rather than a terminal: progress lines during an epoch (a SLURM
output file got one line per epoch) and no empty run folder left by a run that failed before it
logged anything (``[rank R]`` prefixes: tests/integration/launch/test_rank_prefix.py)."""

from __future__ import annotations

import io
import sys

import pytest

from tests.helpers.command_env import REPO
from trainkit.cli import main
from trainkit.cli.rank_prefix import PrefixedLines

CONFIG = str(REPO / "configs" / "autoencoder.yaml")


def test_without_a_terminal_progress_lines_come_during_the_epoch(tmp_path, capsys, monkeypatch):
    """At most one line every $TRAINKIT_PROGRESS_SECONDS (here: at every batch), then the
    epoch's own line."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["trainkit"])
    monkeypatch.setenv("TRAINKIT_PROGRESS_SECONDS", "1e-9")
    code = main(
        [
            "fit",
            "-c",
            CONFIG,
            "--trainer.max_epochs=1",
            "--trainer.limit_train_batches=3",
            "--trainer.limit_val_batches=1",
            "--trainer.log_every_n_steps=1",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    during = [line for line in out.splitlines() if line.startswith("epoch 0: batch ")]
    assert [line.split("  ")[0] for line in during] == [
        "epoch 0: batch 1/3",
        "epoch 0: batch 2/3",
        "epoch 0: batch 3/3",
    ], out
    assert "train_loss=" in during[-1] and "step 3" in during[-1]
    assert [line for line in out.splitlines() if line.startswith("epoch 0: step 3")], out


def test_the_default_progress_interval_is_half_a_minute(monkeypatch):
    from trainkit.callbacks.progress import ProgressBar

    monkeypatch.delenv("TRAINKIT_PROGRESS_SECONDS", raising=False)
    assert ProgressBar().line_every_s == 30.0
    assert ProgressBar(line_every_s=0).line_every_s == 0


def test_a_rank_prefix_starts_every_line_however_it_is_written():
    stream = io.StringIO()
    prefixed = PrefixedLines(stream, "[rank 1] ")
    prefixed.write("one")
    prefixed.write(" line\ntwo\nthree")
    prefixed.write("\n")
    assert stream.getvalue() == "[rank 1] one line\n[rank 1] two\n[rank 1] three\n"
    assert not prefixed.isatty()  # no live bars through a prefix


def test_a_run_that_crashed_in_setup_leaves_no_empty_run_folder(tmp_path, capsys, monkeypatch):
    """Its folder held only the config it was given: it goes, so the next run is version_0."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["trainkit"])
    with pytest.raises(RuntimeError, match="setup failed on purpose"):
        main(
            [
                "fit",
                "-c",
                CONFIG,
                "--model=tests.helpers.mistakes.CrashesInSetup",
                "--trainer.default_root_dir=run",
            ]
        )
    assert not list((tmp_path / "run").rglob("version_*")), sorted(tmp_path.rglob("*"))
