"""The ``trainkit`` console command: runs driven in subprocesses exactly as a user types them;
the bad-input table, --print_config and --help through its entry point in this process."""

from __future__ import annotations

import csv
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
import yaml

from tests.helpers import warm_python
from tests.helpers.command_env import REPO, cli_env
from tests.helpers.pace import wall

FAST = ["--trainer.max_epochs", "2", "--data.init_args.num_samples", "512"]


@pytest.fixture
def printed(tmp_path, capsys, monkeypatch):
    """``printed(ARGS)``: what ``trainkit ARGS`` prints for --print_config or --help, run through
    the entry point in this process (the README tour test types them as a user does)."""
    from trainkit.cli import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["trainkit"])

    def run(*args: str) -> str:
        with pytest.raises(SystemExit) as exit_info:
            main(list(args))
        out, err = capsys.readouterr()
        assert exit_info.value.code in (0, None), err
        return out

    return run


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


def test_fit_resumes_with_ckpt_path_last(run_cli, autoencoder_config, tmp_path):
    assert run_cli("fit", "-c", autoencoder_config, *FAST).returncode == 0
    resumed = run_cli(
        "fit",
        "-c",
        autoencoder_config,
        *FAST[2:],
        "--trainer.max_epochs",
        "3",
        "--ckpt_path",
        "last",
    )
    assert resumed.returncode == 0, resumed.stderr
    lines = [line for line in resumed.stdout.splitlines() if line.startswith("epoch")]
    assert [line.split(":")[0] for line in lines] == ["epoch 2"]


def test_later_configs_and_dotted_overrides_win(printed, autoencoder_config, tmp_path):
    override = tmp_path / "override.yaml"
    override.write_text("trainer:\n  max_epochs: 7\nmodel:\n  init_args:\n    hidden: 16\n")
    config = yaml.safe_load(
        printed(
            "fit",
            "-c",
            autoencoder_config,
            "-c",
            str(override),
            "--model.init_args.hidden",
            "8",
            "--print_config",
        )
    )
    assert config["trainer"]["max_epochs"] == 7 and config["model"]["init_args"]["hidden"] == 8


def test_print_config_round_trips(printed, autoencoder_config, tmp_path):
    first = printed("fit", "-c", autoencoder_config, "--trainer.max_epochs", "3", "--print_config")
    saved = tmp_path / "resolved.yaml"
    saved.write_text(first)
    second = printed("fit", "-c", str(saved), "--print_config")
    assert yaml.safe_load(second) == yaml.safe_load(first)
    assert yaml.safe_load(first)["trainer"]["max_epochs"] == 3


def test_omegaconf_interpolation_and_env_defaults(printed, tmp_path, monkeypatch):
    config = tmp_path / "interp.yaml"
    config.write_text(
        textwrap.dedent("""
        model:
          class_path: trainkit.demos.autoencoder.AutoEncoder
          init_args: {hidden: 24, latent: 3}
        data:
          class_path: trainkit.demos.autoencoder.SyntheticDataModule
          init_args: {rank: "${model.init_args.latent}"}
        trainer:
          default_root_dir: ${oc.env:TK_TEST_ROOT,/tmp/fallback}
    """)
    )
    monkeypatch.setenv("TK_TEST_ROOT", str(tmp_path / "r"))
    resolved = yaml.safe_load(printed("fit", "-c", str(config), "--print_config"))
    assert resolved["data"]["init_args"]["rank"] == 3
    assert resolved["trainer"]["default_root_dir"] == str(tmp_path / "r")


def test_optimizer_and_lr_scheduler_sections_replace_configure_optimizers(
    run_cli, autoencoder_config, tmp_path
):
    result = run_cli(
        "fit",
        "-c",
        autoencoder_config,
        *FAST,
        "--optimizer",
        "SGD",
        "--optimizer.lr",
        "0.5",
        "--optimizer.momentum",
        "0.9",
        "--lr_scheduler",
        "StepLR",
        "--lr_scheduler.step_size",
        "1",
        "--lr_scheduler.gamma",
        "0.1",
    )
    assert result.returncode == 0, result.stderr
    checkpoint = torch.load(
        version_dirs(tmp_path)[0] / "checkpoints" / "last.ckpt", weights_only=True
    )
    group = checkpoint["optimizer_states"][0]["param_groups"][0]
    assert group["momentum"] == 0.9 and group["lr"] == pytest.approx(0.5 * 0.1**2)


def test_top_level_help_lists_subcommands_without_importing_torch():
    code = "import sys\nfrom trainkit.cli import main\ntry:\n main(['--help'])\nexcept SystemExit:\n pass\nprint('torch' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=cli_env()
    ).stdout
    assert all(name in out for name in ("fit", "validate", "test", "predict"))
    assert out.strip().endswith("False")


def test_fit_help_documents_trainer_model_and_data_arguments(printed, autoencoder_config):
    help_text = printed("fit", "-c", autoencoder_config, "--help")
    assert "--trainer.devices" in help_text and "Stop after this many epochs" in help_text
    assert "--model.help" in help_text
    model_help = printed("fit", "--model.help", "trainkit.demos.autoencoder.AutoEncoder")
    assert "--model.hidden" in model_help and "Width of the hidden layer" in model_help


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
    result = warm_python.run(  # started from the worker's warm interpreter
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
        timeout=wall(120),
    )
    assert result.returncode == 0, result.stderr
    saved = yaml.safe_load(next(tmp_path.glob("trainkit_logs/version_0/config.yaml")).read_text())
    assert saved["model"]["hidden"] == 8


BAD_INPUTS = [
    (["train"], "'train'"),
    # the mistakes people make, each answered with the spelling they meant
    (["fit", "{cfg}"], "expected a config file after -c; did you mean -c "),
    (["fit", "-c", "{cfg}", "--seed", "0"], "did you mean --seed_everything?"),
    (["fit", "-c", "{cfg}", "--trainer.logger", "csv"], "did you mean CSVLogger?"),
    (["fit", "-c", "{cfg}", "--trainer.max_epoch", "3"], "did you mean --trainer.max_epochs?"),
    (["fit", "-c", "{cfg}", "--trainer.bogus", "1"], "--trainer.bogus"),
    (["fit", "-c", "{cfg}", "--trainer.max_epochs", "abc"], "trainer.max_epochs 'abc'"),
    (["fit"], "model"),
    (["fit", "--model", "nope.Nope"], "'nope.Nope'"),
    (["fit", "-c", "{bad_yaml}"], "is not valid YAML"),
    (["fit", "-c", "{bad_interp}"], "model.init_args.nothere"),
    (["fit", "-c", "/nonexistent/config.yaml"], "'/nonexistent/config.yaml'"),
    (["fit", "-c", "{cfg}", "--trainer.devices", "3-1"], "'3-1'"),
    (["fit", "-c", "{cfg}", "--trainer.devices", "0,0"], "'0,0'"),
    (["fit", "-c", "{cfg}", "--trainer.devices", "-2"], "-2"),
    (["fit", "-c", "{cfg}", "--trainer.accelerator", "gpu", "--trainer.devices", "1"], "no CUDA"),
    (["fit", "-c", "{cfg}", "--trainer.precision", "64"], "'64'"),
    (["fit", "-c", "{cfg}", "--trainer.precision", "16-mixed"], "bf16-mixed"),
    (["fit", "-c", "{cfg}", "--trainer.strategy", "horovodd"], "did you mean 'horovod'"),
    (["fit", "-c", "{cfg}", "--model.init_args.hidden", "x"], "model.init_args.hidden 'x'"),
    (["fit", "-c", "{cfg}", "--optimizer", "Adamm"], "'Adamm'"),
    (
        ["fit", "-c", "{cfg}", "--lr_scheduler", "StepLR", "--lr_scheduler.step_size", "1"],
        "optimizer section",
    ),
    (["test", "-c", "{cfg}", "--ckpt_path", "/nope.ckpt"], "'/nope.ckpt'"),
    (
        ["test", "-c", "{cfg}", "--ckpt_path", "best", "--trainer.default_root_dir", "empty"],
        "'best'",  # ('last' with none there tests the model as built, as in Lightning)
    ),
    (
        ["fit", "-c", "{cfg}", "--trainer.devices", "2", "--trainer.strategy", "ddp"],
        "TRAINKIT_DISTRIBUTED_BACKEND",
    ),
]


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


@pytest.mark.parametrize(
    ("args", "named"), BAD_INPUTS, ids=[" ".join(a[-2:]) for a, _ in BAD_INPUTS]
)
def test_bad_input_exits_2_with_one_line_and_no_traceback(
    tmp_path, autoencoder_config, capsys, monkeypatch, args, named
):
    """The table runs through the console script's entry point in this process (an interpreter
    per row would cost seconds each); the test below runs one row as the real console script."""
    from trainkit.cli import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["trainkit"])
    monkeypatch.setenv("TRAINKIT_DISTRIBUTED_BACKEND", "nccl")
    with pytest.raises(SystemExit) as exit_info:
        main(bad_input_argv(args, tmp_path, autoencoder_config))
    err = capsys.readouterr().err
    assert exit_info.value.code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("trainkit: error: ") and named in lines[0]
    assert "Traceback" not in err


@pytest.mark.slow  # starts interpreters
def test_a_bad_input_through_the_console_script_is_one_line_exit_2(tmp_path, autoencoder_config):
    argv = ["fit", "-c", "{cfg}", "--model.init_args.hidden", "x"]
    result = subprocess.run(
        [sys.executable, "-m", "trainkit", *bad_input_argv(argv, tmp_path, autoencoder_config)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=wall(60),
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
        timeout=wall(120),
        env=cli_env(),
    )
    assert result.returncode == 1
    assert "Traceback" in result.stderr and "boom on purpose" in result.stderr


def test_evaluating_without_a_checkpoint_says_the_weights_are_untrained(
    tmp_path, autoencoder_config, capsys, monkeypatch
):
    """``trainkit test`` without --ckpt_path evaluates the model as the config builds it: it
    runs (as in Lightning) and says so in one line."""
    from trainkit.cli import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["trainkit"])
    main(["test", "-c", autoencoder_config, "--trainer.limit_test_batches", "1"])
    said = [line for line in capsys.readouterr().err.splitlines() if "--ckpt_path" in line]
    assert said == [
        "trainkit: test without --ckpt_path used the model as the config builds it (untrained "
        "weights); pass --ckpt_path last, best or a file to use a trained one"
    ]


def test_an_unknown_key_in_a_config_file_gets_the_key_it_resembles(
    tmp_path, autoencoder_config, capsys, monkeypatch
):
    from trainkit.cli import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["trainkit"])
    (tmp_path / "typo.yaml").write_text("trainer:\n  max_epoch: 2\n")
    with pytest.raises(SystemExit) as exit_info:
        main(["fit", "-c", autoencoder_config, "-c", "typo.yaml"])
    err = capsys.readouterr().err.strip()
    assert exit_info.value.code == 2 and len(err.splitlines()) == 1
    assert err == (
        "trainkit: error: config key 'trainer.max_epoch' unknown; expected one listed by "
        "trainkit fit --help; did you mean 'trainer.max_epochs'?"
    )
