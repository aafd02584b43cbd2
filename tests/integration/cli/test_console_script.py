"""The ``trainkit`` command as a user types it, in a new interpreter: one run of each
subcommand, a user's script with fixed classes, and errors as the console prints them."""

from __future__ import annotations

import csv
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
import yaml

from tests.helpers.command_env import REPO, cli_env, run_captured

FAST = ["--trainer.max_epochs", "2", "--data.init_args.num_samples", "512"]


def version_dirs(root: Path) -> list[Path]:
    return sorted((root / "runs" / "autoencoder" / "trainkit_logs").glob("version_*"))


def test_fit_then_test_validate_predict_from_the_last_checkpoint(
    run_cli, autoencoder_config, tmp_path
):
    fit = run_cli("fit", "-c", autoencoder_config, *FAST)
    assert fit.returncode == 0, fit.stderr
    run = version_dirs(tmp_path)[0]
    assert (run / "checkpoints" / "last.ckpt").is_file()
    assert (run / "metrics.csv").is_file() and list(run.glob("events.out.tfevents.*"))
    saved = yaml.safe_load((run / "config.yaml").read_text())
    assert saved["trainer"]["max_epochs"] == 2 and saved["seed_everything"] == 42
    closing = fit.stdout.split("fit done in", 1)[1]  # where everything went
    assert "epoch 2, step 14" in closing.splitlines()[0]
    for line in (
        "best checkpoint",
        "(the latest: no monitor",
        "last checkpoint",
        "tensorboard --logdir",
    ):
        assert line in closing

    test = run_cli("test", "-c", autoencoder_config, "--ckpt_path", "last")
    assert test.returncode == 0, test.stderr
    assert "test_loss" in test.stdout
    validate = run_cli("validate", "-c", autoencoder_config, "--ckpt_path", "best")
    assert validate.returncode == 0 and "val_loss" in validate.stdout
    predict = run_cli("predict", "-c", autoencoder_config, "--ckpt_path", "last")
    assert predict.returncode == 0, predict.stderr
    path = Path(predict.stdout.strip().splitlines()[-1].split(" to ")[-1])
    predictions = torch.load(tmp_path / path if not path.is_absolute() else path)
    assert predictions[0].shape == (64, 4)

    # each evaluation said what it loaded and wrote beside the run it evaluated
    last = run.relative_to(tmp_path) / "checkpoints" / "last.ckpt"
    assert f"trainkit: loaded {last}; evaluating the weights of epoch 1, step 14" in test.stdout
    assert version_dirs(tmp_path) == [run], "an evaluation started a run folder of its own"
    assert yaml.safe_load((run / "config.yaml").read_text()) == saved  # the fit's, kept
    assert yaml.safe_load((run / "config_test.yaml").read_text())["ckpt_path"] == "last"
    assert (tmp_path / path).parent == run
    rows = list(csv.DictReader((run / "metrics.csv").open()))
    assert any(row.get("epoch") == "0" for row in rows), "the fit's rows were lost"
    assert [row["step"] for row in rows if row.get("test_loss")] == ["14"]  # the weights' step


@pytest.mark.slow  # starts interpreters
def test_user_script_with_fixed_classes(tmp_path):
    script = tmp_path / "main.py"
    script.write_text(
        textwrap.dedent("""
        from trainkit import TrainkitCLI
        from trainkit.demos.autoencoder import AutoEncoder, SyntheticDataModule

        def cli_main():
            TrainkitCLI(AutoEncoder, SyntheticDataModule)

        if __name__ == "__main__":
            cli_main()
    """)
    )
    result = run_captured(
        [
            sys.executable,
            str(script),
            "fit",
            "--model.hidden",
            "8",
            "--data.num_samples",
            "256",
            "--trainer.max_epochs",
            "1",
            "--trainer.default_root_dir",
            str(tmp_path),
        ],
        cwd=tmp_path,
        env=cli_env(),
        timeout=240,
    )
    assert result.returncode == 0, result.stderr
    saved = yaml.safe_load(next(tmp_path.glob("trainkit_logs/version_0/config.yaml")).read_text())
    assert saved["model"]["hidden"] == 8


def bad_input_argv(args: list[str], folder: Path, config: str) -> list[str]:
    """``args`` with its placeholders filled: the demo config, a broken YAML file, a config whose
    interpolation names a missing key (both written into ``folder``)."""
    bad_yaml = folder / "bad.yaml"
    bad_yaml.write_text("model: [unclosed\n")
    bad_interp = folder / "interp.yaml"
    bad_interp.write_text(
        "model:\n  class_path: trainkit.demos.autoencoder.AutoEncoder\n"
        "  init_args:\n    hidden: ${model.init_args.nothere}\n"
    )
    paths = {"cfg": config, "bad_yaml": str(bad_yaml), "bad_interp": str(bad_interp)}
    return [a.format(**paths) for a in args]


@pytest.mark.slow  # starts interpreters
def test_a_bad_input_through_the_console_script_is_one_line_exit_2(tmp_path, autoencoder_config):
    argv = ["fit", "-c", "{cfg}", "--model.init_args.hidden", "x"]
    result = subprocess.run(
        [sys.executable, "-m", "trainkit", *bad_input_argv(argv, tmp_path, autoencoder_config)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env=cli_env(),
    )
    assert result.returncode == 2, result.stderr
    assert result.stderr.startswith("trainkit: error: model.init_args.hidden 'x'")
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr


@pytest.mark.slow  # starts interpreters
def test_errors_in_user_code_keep_their_traceback(tmp_path):
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "trainkit",
            "fit",
            "-c",
            str(REPO / "configs" / "autoencoder.yaml"),
            "--model",
            "tests.helpers.models.Failing",
            "--model.init_args.fail_rank",
            "0",
            "--trainer.max_epochs",
            "1",
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=240,
        env=cli_env(),
    )
    assert result.returncode == 1
    assert "Traceback" in result.stderr and "boom on purpose" in result.stderr
