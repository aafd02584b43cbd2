"""Mistakes a new user makes, each answered with exit code 2 and one line that names the key,
the bad value and the fix; never a traceback, never a silent exit 0."""

from __future__ import annotations

import sys

import pytest

from tests.helpers.command_env import REPO
from trainkit.cli import main

CONFIG = str(REPO / "configs" / "autoencoder.yaml")
FIT = ["fit", "-c", CONFIG]

FILES = {
    "wrong_type.yaml": "model:\n  class_path: trainkit.demos.autoencoder.AutoEncoder\n"
    "  init_args:\n    hidden: big\n",
    "broken.yaml": "model:\n  class_path: trainkit.demos.autoencoder.AutoEncoder\n"
    "  init_args: {hidden: [1, 2\n",
    "no_data.yaml": "model:\n  class_path: trainkit.demos.autoencoder.AutoEncoder\n"
    "trainer:\n  max_epochs: 1\n",
    "broken_user_module.py": "import not_installed_pkg\n\nclass Thing: ...\n",
    "stray_key.yaml": "model:\n  class_path: trainkit.demos.autoencoder.AutoEncoder\n"
    "  init_args:\n    hidden: 32\n  lr: 0.1\n",
    "typos.yaml": "trainer:\n  max_epoch: 2\n  devics: 1\nseed_everythin: 3\n",
    "typo_and_init_typo.yaml": "trainer:\n  max_epoch: 2\ndata:\n  init_args:\n    batch_sise: 3\n",
}

CASES = {
    "a misspelled init argument": (
        [*FIT, "--model.init_args.hiden", "32"],
        ["'hiden' is not an argument of trainkit.demos.autoencoder.AutoEncoder", "'hidden'?"],
    ),
    "a wrong type in YAML quotes the value": (
        [*FIT, "-c", "wrong_type.yaml"],
        ["model.init_args.hidden 'big'; expected int"],
    ),
    "a YAML syntax error names the file and line": (
        ["fit", "-c", "broken.yaml"],
        ["config file 'broken.yaml' is not valid YAML", "line 4"],
    ),
    "no data section for fit": (
        ["fit", "-c", "no_data.yaml"],
        ["fit needs train data; there is no data section", "add train_dataloader or a data"],
    ),
    "test with a DataModule without test_dataloader": (
        ["test", "-c", CONFIG, "--data", "tests.helpers.mistakes.OnlyTrainData"],
        ["OnlyTrainData (the data section) defines no test_dataloader"],
    ),
    "validate with a DataModule without val_dataloader": (
        ["validate", "-c", CONFIG, "--data", "tests.helpers.mistakes.OnlyTrainData"],
        ["defines no val_dataloader"],
    ),
    "a zero batch size": ([*FIT, "--data.init_args.batch_size", "0"], ["batch_size 0"]),
    "a ValueError of the user's own __init__": (
        [*FIT, "--model", "tests.helpers.mistakes.Picky", "--model.init_args.width", "500"],
        [
            "model tests.helpers.mistakes.Picky(width=500) was rejected by the class (mistakes.py:",
            "width 500 is too wide",
        ],
    ),
    "a class that is no TrainModule": (
        [*FIT, "--model", "torch.nn.Linear"],
        ["'torch.nn.Linear' is not a TrainModule", "e.g. my_package.MyModel"],
    ),
    "a class that is no DataModule": (
        [*FIT, "--data", "torch.nn.Linear"],
        ["is not a DataModule", "e.g. my_package.MyData"],
    ),
    "test on a module without test_step": (
        ["test", "-c", CONFIG, "--model", "tests.helpers.mistakes.TrainsOnly"],
        ["TrainsOnly defines no test_step; test needs one", "add it to TrainsOnly"],
    ),
    "validate on a module without validation_step": (
        ["validate", "-c", CONFIG, "--model", "tests.helpers.mistakes.TrainsOnly"],
        ["defines no validation_step; validate needs one"],
    ),
    "predict on a module without predict_step or forward": (
        ["predict", "-c", CONFIG, "--model", "tests.helpers.mistakes.TrainsOnly"],
        ["defines no predict_step; predict needs one", "(or forward)"],
    ),
    "a typo in an option": (
        [*FIT, "--trainer.max_epoch", "3"],
        ["'--trainer.max_epoch' is unknown", "did you mean --trainer.max_epochs?"],
    ),
    "GPU ids on a CPU machine": (
        [*FIT, "--trainer.accelerator", "cpu", "--trainer.devices", "0,1"],
        ["name GPUs; on CPU write devices: N"],
    ),
    "a model package that is not importable": (
        [*FIT, "--model", "my_missing_project.Model"],
        ["module 'my_missing_project' was not found", "pip install -e ."],
    ),
    "a class name the module lacks": (
        [*FIT, "--model", "trainkit.demos.autoencoder.Nope"],
        ["module 'trainkit.demos.autoencoder' has no 'Nope'; check the class name"],
    ),
    "a user module importing a missing package names its file and line": (
        [*FIT, "--model", "broken_user_module.Thing"],
        ["broken_user_module.py line 1 imports 'not_installed_pkg', which is not installed"],
    ),
    "accelerator gpu on a machine without CUDA blames the accelerator": (
        [*FIT, "--trainer.accelerator", "gpu"],
        ["trainer.accelerator 'gpu'; expected 'cpu' or 'auto' on this machine"],
    ),
    "an abbreviated option with =": (
        [*FIT, "--trainer.max_epoch=3"],
        ["'--trainer.max_epoch' is unknown", "never abbreviated"],
    ),
    "an abbreviated top-level option": ([*FIT, "--seed", "1"], ["'--seed' is unknown"]),
    "a quoted GPU id on CPU": (
        [*FIT, "--trainer.accelerator", "cpu", "--trainer.devices", '"0"'],
        ["trainer.devices '0'", "name GPUs"],
    ),
    "a GPU id list on CPU": (
        [*FIT, "--trainer.accelerator", "cpu", "--trainer.devices", "[0, 1]"],
        ["trainer.devices [0, 1]", "name GPUs"],
    ),
    "an unknown subcommand": (["train", "-c", CONFIG], ["subcommand 'train'; expected one of"]),
    "a scheduler without an optimizer": (
        [
            *FIT,
            "--lr_scheduler",
            "torch.optim.lr_scheduler.StepLR",
            "--lr_scheduler.init_args.step_size",
            "2",
        ],
        ["lr_scheduler", "an optimizer section too"],
    ),
    "no configure_optimizers and no optimizer section": (
        [*FIT, "--model", "tests.helpers.mistakes.NoOptimizer"],
        [
            "NoOptimizer defines no configure_optimizers and the config has no optimizer section",
            "add configure_optimizers to NoOptimizer",
            "or an optimizer section (optimizer: {class_path: torch.optim.Adam",
        ],
    ),
    "a key indented beside init_args names the key": (
        [*FIT, "-c", "stray_key.yaml"],
        ["model key 'lr' beside class_path and init_args", "indent lr under model.init_args"],
    ),
    "every unknown key of a config at once": (
        [*FIT, "-c", "typos.yaml"],
        [
            "config keys 'trainer.max_epoch', 'trainer.devics', 'seed_everythin' unknown",
            "'trainer.max_epochs' for 'trainer.max_epoch', 'trainer.devices' for "
            "'trainer.devics', 'seed_everything' for 'seed_everythin'",
        ],
    ),
    "unknown keys besides another mistake of the same config": (
        [*FIT, "-c", "typo_and_init_typo.yaml"],
        [
            "'batch_sise' is not an argument",
            "also unknown config keys 'trainer.max_epoch' (did you mean 'trainer.max_epochs'",
        ],
    ),
    "a class without its required argument": (
        [
            *FIT,
            "--optimizer",
            "torch.optim.SGD",
            "--lr_scheduler",
            "torch.optim.lr_scheduler.StepLR",
        ],
        ["'torch.optim.lr_scheduler.StepLR' needs step_size", "init_args: {step_size: ...}"],
    ),
}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("case", list(CASES))
def test_a_mistake_is_one_line_exit_2_naming_the_fix(case, tmp_path, capsys, monkeypatch):
    argv, expected = CASES[case]
    for name, text in FILES.items():
        (tmp_path / name).write_text(text)
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["trainkit"])
    exit_code = main([*argv, "--trainer.default_root_dir", str(tmp_path)])
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert exit_code == 2, err
    assert len(lines) == 1 and lines[0].startswith("trainkit: error: "), err
    for text in expected:
        assert text in lines[0], lines[0]
    assert "pip install not_installed_pkg" not in lines[0]  # the name may be misspelled
    assert not list(tmp_path.glob("trainkit_logs/version_*")), "a failed start left a run folder"


USER_CODE = {
    "a NameError": ("HIDDEN = undefined_name * 2\n", "NameError", "line 2"),
    "a SyntaxError": ("class Broken(tk.TrainModule)\n    pass\n", "SyntaxError", "line 2"),
}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("case", list(USER_CODE))
def test_an_error_in_the_users_module_keeps_its_traceback(case, tmp_path, capsys, monkeypatch):
    """Before, the parser reported the class as 'not a TrainModule', with no file or line."""
    source, kind, line = USER_CODE[case]
    name = f"userpkg_{kind.lower()}"  # one package per case: this process keeps imported ones
    package = tmp_path / name
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "model.py").write_text(f"import trainkit as tk\n{source}\nclass Model: ...\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["trainkit"])
    exit_code = main([*FIT, "--model", f"{name}.model.Model"])
    err = capsys.readouterr().err
    assert exit_code == 1, err  # an error in the user's code, as in training_step
    assert err.startswith("Traceback (most recent call last):"), err
    assert f'{package / "model.py"}", {line}' in err  # the user's file and line
    assert "trainkit/" not in err.split("\n", 1)[1].rsplit("\n", 2)[0]  # only the user's frames
    assert err.strip().splitlines()[-1] == (
        f"trainkit: error: model class_path '{name}.model.Model': importing '{name}.model' "
        f"raised {kind} in your code (traceback above); fix it there"
    )


INIT_ERRORS = {
    "a KeyError of its own": (
        "ReadsAMisspelledKey",
        "KeyError: 'hiden'",
        'sizes["hiden"]',
        "raised KeyError while it was built, in your code (traceback above), not in the config; "
        "fix it there",
    ),
    "a forgotten super().__init__()": (
        "ForgetsSuperInit",
        "AttributeError: cannot assign module before Module.__init__() call",
        "self.layer = torch.nn.Linear(32, hidden)",
        "call super().__init__() first in ForgetsSuperInit.__init__",
    ),
    ".cuda() in __init__": (
        "MovesItselfToCuda",
        "Torch not compiled with CUDA enabled",
        ".cuda()",
        "remove .cuda()/.to(device) from MovesItselfToCuda.__init__: trainkit moves the model to "
        "its devices",
    ),
}


@pytest.mark.timeout(120)
@pytest.mark.parametrize("case", list(INIT_ERRORS))
def test_an_error_raised_in_the_users_init_keeps_its_traceback(case, tmp_path, capsys, monkeypatch):
    """Not a config error ('was rejected by the class ... change model.init_args' sent the user
    searching the YAML): the user's frames of the traceback, one line, exit 1."""
    name, raised, source_line, fix = INIT_ERRORS[case]
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["trainkit"])
    exit_code = main([*FIT, "--model", f"tests.helpers.mistakes.{name}"])
    err = capsys.readouterr().err.strip()
    lines = err.splitlines()
    assert exit_code == 1, err
    assert lines[0] == "Traceback (most recent call last):", err
    assert "mistakes.py" in lines[1] and "in __init__" in lines[1], err
    assert source_line in err and raised in err
    assert not [line for line in lines if "site-packages" in line or "trainkit/" in line], err
    assert lines[-1].startswith(f"trainkit: error: model tests.helpers.mistakes.{name}(")
    assert lines[-1].endswith(fix), lines[-1]
    assert "init_args" not in lines[-1]  # the config is not what to change
    assert not list(tmp_path.glob("**/version_*")), "a failed start left a run folder"


def test_argparse_in_the_users_module_is_named_as_theirs(tmp_path, capsys, monkeypatch):
    """Its usage line reads like trainkit's (argparse takes the program name from argv[0]):
    a trainkit line after it names the user's file and the fix."""
    (tmp_path / "own_cli.py").write_text(
        "import argparse\n\nimport trainkit as tk\n\nparser = argparse.ArgumentParser()\n"
        'parser.add_argument("--epochs", type=int)\nargs = parser.parse_args()\n\n\n'
        "class Model(tk.TrainModule):\n    pass\n"
    )
    monkeypatch.chdir(tmp_path)
    argv = [*FIT, "--model", "own_cli.Model"]
    monkeypatch.setattr(sys, "argv", ["trainkit", *argv])  # what the user's argparse reads
    exit_code = main(argv)
    lines = capsys.readouterr().err.strip().splitlines()
    assert exit_code == 2
    assert lines[0] == "usage: trainkit [-h] [--epochs EPOCHS]", lines
    assert lines[-1] == (
        "trainkit: error: the usage and error lines above come from your file's argparse, not "
        f"trainkit: {tmp_path / 'own_cli.py'}:7 calls parse_args() when trainkit imports it; "
        'expected no argument parsing at import; move parse_args() under if __name__ == "__main__":'
    )


def test_a_training_step_without_a_loss_is_said_once(tmp_path, capsys, monkeypatch):
    """It trains nothing, silently, under automatic optimization: one line at the first batch."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["trainkit"])
    main([*FIT, "--model", "tests.helpers.mistakes.ForgetsTheLoss", "--trainer.max_epochs=2"])
    err = capsys.readouterr().err
    said = [line for line in err.splitlines() if "training_step returned None" in line]
    assert said == [
        "trainkit: training_step returned None at epoch 0, batch 0: that batch trains nothing "
        "(automatic optimization); return the loss, or a dict with 'loss' (returning None on "
        "purpose skips a batch; said once)"
    ], err


def test_self_log_of_a_tensor_with_many_values_fails_at_the_call(tmp_path, capsys, monkeypatch):
    """At the user's own self.log line, naming the metric and its shape (it used to fail ten
    steps later inside trainkit)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["trainkit"])
    with pytest.raises(
        ValueError, match=r"self.log\('per_sample', ...\) got .* shape \(64,\)"
    ) as err:
        main([*FIT, "--model", "tests.helpers.mistakes.LogsAVector"])
    frames = [frame for frame in err.traceback if "mistakes.py" in str(frame.path)]
    assert frames and "self.log(" in str(frames[-1].statement)  # the user's line raised


def test_a_train_dataloader_returning_none_is_named(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["trainkit"])
    exit_code = main(["fit", "--model", "tests.helpers.mistakes.LoaderReturnsNone"])
    lines = capsys.readouterr().err.strip().splitlines()
    assert exit_code == 2
    assert lines == [
        "trainkit: error: LoaderReturnsNone.train_dataloader() returned None; expected a "
        "DataLoader (or any iterable of batches); return the loader it builds"
    ]


def test_early_stopping_on_a_key_never_logged_is_one_line_with_the_closest(
    tmp_path, capsys, monkeypatch
):
    """Found at the first validation (the key can only be missed once metrics exist): one line
    with the closest logged key, as ModelCheckpoint's, not a traceback of trainkit's code."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["trainkit"])
    exit_code = main(
        [
            *FIT,
            "--trainer.callbacks+=EarlyStopping",
            "--trainer.callbacks.monitor=val_los",
            "--trainer.max_epochs=1",
        ]
    )
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert exit_code == 2
    assert len(lines) == 1 and lines[0].startswith("trainkit: error: Early stopping"), lines
    assert "`val_los` which is not available" in lines[0]
    assert lines[0].endswith("did you mean 'val_loss'?")


def test_a_mistake_found_after_training_started_keeps_what_the_run_logged(
    tmp_path, capsys, monkeypatch
):
    """The monitored key is missed at the first validation, after the run logged its first
    metrics: as under Lightning, the run folder keeps what was logged (metrics.csv, events,
    hparams.yaml) for the user to read; only a folder holding nothing but the config goes."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["trainkit"])
    missing = ["--trainer.callbacks+=EarlyStopping", "--trainer.callbacks.monitor=val_los"]
    exit_code = main([*FIT, *missing, "--trainer.max_epochs=1", "--trainer.default_root_dir=run"])
    assert exit_code == 2
    kept = {path.name for path in (tmp_path / "run").rglob("*") if path.is_file()}
    assert {"metrics.csv", "hparams.yaml"} <= kept, sorted(kept)


def test_a_mistake_found_after_a_checkpoint_was_saved_keeps_the_run_folder(
    tmp_path, capsys, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["trainkit"])
    saving = ["--trainer.callbacks+=ModelCheckpoint", "--trainer.callbacks.every_n_train_steps=1"]
    missing = ["--trainer.callbacks+=EarlyStopping", "--trainer.callbacks.monitor=val_los"]
    exit_code = main(
        [*FIT, *saving, *missing, "--trainer.max_epochs=1", "--trainer.default_root_dir=run"]
    )
    assert exit_code == 2
    assert list((tmp_path / "run").rglob("*.ckpt")), sorted(tmp_path.rglob("*"))


def test_an_effective_batch_the_ranks_cannot_share_is_refused_before_they_start(
    tmp_path, capsys, monkeypatch
):
    """Once, by the process the user started (each rank used to refuse it on its own)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["trainkit"])
    exit_code = main(
        [
            *FIT,
            "--trainer.devices=2",
            "--trainer.batch_size_mode=effective",
            "--data.init_args.batch_size=63",
            "--trainer.default_root_dir=run",
        ]
    )
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert exit_code == 2
    assert lines == [
        "trainkit: error: batch_size 63; expected a multiple of the world size 2 with "
        "batch_size_mode: effective; use 62 or 64"
    ]
    assert not list(tmp_path.glob("run/**/version_*")), "ranks started"


@pytest.mark.parametrize(("rank", "said"), [("0", 1), ("1", 0)])
def test_under_an_external_launcher_rank_zero_alone_says_the_bad_input(
    rank, said, tmp_path, capsys, monkeypatch
):
    """torchrun starts every rank with the same argv: one line in its dump, not one per rank."""
    torchrun = {"RANK": rank, "LOCAL_RANK": rank, "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2"}
    for key, value in torchrun.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("TORCHELASTIC_RUN_ID", "test")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["trainkit"])
    exit_code = main([*FIT, "--trainer.max_epoch=3"])
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert exit_code == 2
    assert len(lines) == said and all("'--trainer.max_epoch' is unknown" in x for x in lines)
