"""The ``trainkit`` command through its entry point in this process: runs, the bad-input table,
--print_config, --help (one run of each subcommand in a new interpreter, as a user types it:
tests/integration/cli/test_console_script.py)."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest
import torch
import yaml

FAST = ["--trainer.max_epochs", "2", "--data.init_args.num_samples", "512"]


@pytest.fixture
def printed(tmp_path, capsys, monkeypatch):
    """``printed(ARGS)``: what ``trainkit ARGS`` prints for --print_config or --help, run through
    the entry point in this process (the README tour test types them as a user does)."""
    from trainkit.cli import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["trainkit"])

    def run(*args: str) -> str:
        exit_code = main(list(args))
        out, err = capsys.readouterr()
        assert exit_code in (0, None), err
        return out

    return run


def version_dirs(root: Path) -> list[Path]:
    return sorted((root / "runs" / "autoencoder" / "trainkit_logs").glob("version_*"))


def test_fit_resumes_with_ckpt_path_last(run_main, autoencoder_config, tmp_path):
    assert run_main("fit", "-c", autoencoder_config, *FAST).returncode == 0
    resumed = run_main(
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
    run_main, autoencoder_config, tmp_path
):
    result = run_main(
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


def test_fit_help_documents_trainer_model_and_data_arguments(printed, autoencoder_config):
    help_text = printed("fit", "-c", autoencoder_config, "--help")
    assert "--trainer.devices" in help_text and "Stop after this many epochs" in help_text
    assert "--model.help" in help_text
    model_help = printed("fit", "--model.help", "trainkit.demos.autoencoder.AutoEncoder")
    assert "--model.hidden" in model_help and "Width of the hidden layer" in model_help


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
    exit_code = main(bad_input_argv(args, tmp_path, autoencoder_config))
    err = capsys.readouterr().err
    assert exit_code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("trainkit: error: ") and named in lines[0]
    assert "Traceback" not in err


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
    exit_code = main(["fit", "-c", autoencoder_config, "-c", "typo.yaml"])
    err = capsys.readouterr().err.strip()
    assert exit_code == 2 and len(err.splitlines()) == 1
    assert err == (
        "trainkit: error: config key 'trainer.max_epoch' unknown; expected one listed by "
        "trainkit fit --help; did you mean 'trainer.max_epochs'?"
    )


def test_fit_help_titles_each_section_plainly_and_explains_every_option(
    printed, autoencoder_config
):
    """No Python repr or RST markup as a group title; ckpt_path and weights_only explained;
    --trainer.dry_run named as the alias of --dry_run."""
    text = printed("fit", "--help")
    titles = [line for line in text.splitlines() if line and not line.startswith(" ")]
    assert "lr_scheduler: a torch.optim.lr_scheduler class and its init_args" in text
    assert not [t for t in titles if "<class '" in t or "``" in t], titles
    for name in ("trainer", "model", "data", "optimizer", "lr_scheduler", "fit"):
        assert [t for t in titles if t.startswith(f"{name}: ")], (name, titles)
    after = text.split("--ckpt_path CKPT_PATH\n", 1)[1]
    assert after.split("\n", 1)[0].strip().startswith("The checkpoint to start from: 'last'")
    after = text.split("--weights_only {true,false,null}\n", 1)[1]
    assert "torch.load(weights_only=True)" in after.split("--", 1)[0]
    after = text.split("--trainer.dry_run {true,false}\n", 1)[1]
    assert after.split("\n", 1)[0].strip().startswith("The same as --dry_run")
