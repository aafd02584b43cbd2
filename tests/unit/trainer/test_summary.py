"""What a run tells its user: a startup table that shows what actually runs, and third-party
warnings shown once (the closing summary of fit and which checkpoint an evaluation or a resume
loaded: tests/unit/cli/test_command.py and the README tour test)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.models import Regression, regression_loader
from trainkit import Callback

FAST = ["--trainer.max_epochs", "2", "--data.init_args.num_samples", "512"]


def runs(root: Path) -> list[Path]:
    return sorted((root / "runs" / "autoencoder" / "trainkit_logs").glob("version_*"))


def test_the_startup_table_shows_what_runs_next_to_what_was_asked(run_main, autoencoder_config):
    """Two devices asked, one process runs them (dp); the README tour checks ddp's 2 processes."""
    dp = run_main(
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


def test_a_warning_repeated_every_step_is_shown_once(run_main, autoencoder_config):
    result = run_main(
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


def test_the_closing_summary_names_the_best_monitored_value(tmp_path, capsys):
    from trainkit import ModelCheckpoint, Trainer

    trainer = Trainer(
        accelerator="cpu",
        max_epochs=2,
        default_root_dir=str(tmp_path),
        callbacks=[ModelCheckpoint(monitor="val_loss")],
    )
    trainer.fit(Regression(), regression_loader(), regression_loader())
    closing = capsys.readouterr().out.split("fit done in", 1)[1]
    best = trainer.checkpoint_callback.best_model_score
    assert f"(val_loss={float(best):.6g})" in closing
    assert trainer.checkpoint_callback.best_model_path in closing


@pytest.mark.parametrize(
    ("logger", "view"),
    [("csv", None), ("tensorboard", "tensorboard --logdir"), ("both", "tensorboard --logdir")],
)
def test_the_closing_lines_suggest_a_viewer_only_for_loggers_that_have_one(
    tmp_path, capsys, logger, view
):
    from trainkit import Trainer
    from trainkit.loggers import CSVLogger, TensorBoardLogger

    made = {
        "csv": [CSVLogger(str(tmp_path))],
        "tensorboard": [TensorBoardLogger(str(tmp_path))],
        "both": [CSVLogger(str(tmp_path)), TensorBoardLogger(str(tmp_path))],
    }[logger]
    Trainer(accelerator="cpu", max_epochs=1, default_root_dir=str(tmp_path), logger=made).fit(
        Regression(), regression_loader()
    )
    (logs,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("  logs ")]
    assert (view in logs) if view else ("(" not in logs), logs


def test_trainkits_own_warnings_read_as_one_line_and_others_keep_their_source(capsys, monkeypatch):
    """A warning trainkit raises is about the user's settings: one ``trainkit: warning:`` line,
    no trainkit source line; a library's or the user's warning keeps file and line."""
    import sys
    import warnings

    import trainkit.strategies.parallel
    from trainkit.cli.quiet_warnings import show_each_warning_once

    def python_default(message, category, filename, lineno, *rest):  # pytest records instead
        sys.stderr.write(warnings.formatwarning(message, category, filename, lineno))

    monkeypatch.setattr(warnings, "showwarning", python_default)
    show_each_warning_once()
    ours = trainkit.strategies.parallel.__file__
    for _ in range(2):  # shown once
        warnings.showwarning(UserWarning("BatchNorm under ddp ..."), UserWarning, ours, 120)
    warnings.showwarning(UserWarning("a user's warning"), UserWarning, "/home/me/model.py", 7)
    err = capsys.readouterr().err
    assert err.count("trainkit: warning: BatchNorm under ddp ...\n") == 1
    assert "parallel.py" not in err
    assert "/home/me/model.py:7: UserWarning: a user's warning" in err


def test_the_installed_showwarning_takes_file_and_line_by_keyword(monkeypatch):
    """``warnings.showwarning``'s signature, keywords included: a library calling it with
    ``file=``/``line=`` reaches the original with them."""
    import io
    import warnings

    from trainkit.cli.quiet_warnings import show_each_warning_once

    received = []
    monkeypatch.setattr(warnings, "showwarning", lambda *args: received.append(args))
    show_each_warning_once()
    out = io.StringIO()
    warnings.showwarning(UserWarning("w"), UserWarning, "/home/me/model.py", 7, file=out, line="x")
    assert received[0][2:] == ("/home/me/model.py", 7, out, "x")


def test_a_librarys_warning_is_shown_by_rank_0_only_and_the_users_by_every_rank(
    capsys, monkeypatch
):
    """Every rank raises the same library warning: rank 0 shows it; rank 1 shows the user's own
    warnings and trainkit's, and the library's too with TRAINKIT_RANK_WARNINGS=all."""
    import sys
    import sysconfig
    import warnings

    from trainkit.cli.quiet_warnings import show_each_warning_once

    def python_default(message, category, filename, lineno, *rest):
        sys.stderr.write(warnings.formatwarning(message, category, filename, lineno))

    library = f"{sysconfig.get_paths()['purelib']}/somelib/core.py"
    for rank, every_rank, shown in [("0", "", True), ("1", "", False), ("1", "all", True)]:
        monkeypatch.setattr(warnings, "showwarning", python_default)
        monkeypatch.setenv("RANK", rank)
        monkeypatch.setenv("TRAINKIT_RANK_WARNINGS", every_rank)
        show_each_warning_once()
        warnings.showwarning(FutureWarning("deprecated"), FutureWarning, library, 3)
        warnings.showwarning(UserWarning("mine"), UserWarning, "/home/me/model.py", 7)
        err = capsys.readouterr().err
        assert ("somelib/core.py:3: FutureWarning: deprecated" in err) is shown, (rank, err)
        assert "/home/me/model.py:7: UserWarning: mine" in err
