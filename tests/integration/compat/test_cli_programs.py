"""LightningCLI programs ported by changing imports only (tests/integration/compat/programs/cli_*.py, with
their YAML configs beside them): each runs under trainkit from its own command line; where
Lightning is installed, the same file with Lightning's imports ends with the same metrics.

A difference found on the way, and kept out of the programs:
- A DataLoader with ``shuffle=True, generator=g`` draws epoch 1+ orders differently under
  Lightning (it rebuilds the loader); trainkit draws as plain PyTorch does. The programs shuffle
  with the global generator, which both seed alike.
"""

from __future__ import annotations

import shutil

import pytest
import yaml

from tests.integration.compat.ported import PROGRAMS, run_program, same_values

lightning_installed = pytest.mark.skipif(
    __import__("importlib").util.find_spec("lightning") is None,
    reason="Lightning is not installed (pip install 'lightning==2.6.*' to compare with it)",
)

FINETUNE = (
    "fit",
    "-c",
    str(PROGRAMS / "cli_finetune_trainer.yaml"),
    "-c",
    str(PROGRAMS / "cli_finetune_model.yaml"),
)
RUN_FALSE = ("-c", str(PROGRAMS / "cli_run_false.yaml"))
PLATEAU = ("fit", "--model", "MLPRegressor", "--model.hidden", "16")
ARGS = {
    "cli_finetune": FINETUNE,
    "cli_run_false": RUN_FALSE,
    "cli_plateau": PLATEAU,
    "cli_fit_then_test": ("fit",),
}


def run_cli_program(name: str, folder, lightning: bool = False) -> dict:
    folder.mkdir(parents=True, exist_ok=True)
    if name == "cli_plateau":  # its parser reads defaults from the working folder
        shutil.copy(PROGRAMS / "cli_plateau_defaults.yaml", folder)
    return run_program(name, folder, *ARGS[name], lightning=lightning)


@pytest.fixture(scope="module")
def ours(tmp_path_factory):
    """Each program's trainkit run (result, folder), made once for this module's tests."""
    runs: dict[str, tuple[dict, object]] = {}

    def run(name: str) -> tuple[dict, object]:
        if name not in runs:
            folder = tmp_path_factory.mktemp(name)
            runs[name] = (run_cli_program(name, folder), folder)
        return runs[name]

    return run


@pytest.mark.timeout(240)
def test_finetuning_cli_with_layered_configs_short_names_links_and_a_callback_section(ours):
    result, folder = ours("cli_finetune")
    assert result["num_classes"] == 4  # linked from the built data module
    assert result["milestones"] == [1, 2]  # linked from the finetuning section at parse time
    assert result["finetuning"] == ["MilestonesFinetuning"]  # the section's callback trained
    assert result["param_groups"] == 3  # and unfroze the backbone in two steps
    assert result["trainable_before_fit"] == 6 and result["trainable_after_fit"] == 6
    assert result["checkpoint_monitor"] == "val_acc" and result["best_model"]
    assert result["logger"] == "CSVLogger" and result["metrics"]["val_acc"] > 0.8
    run = folder / "logs" / "finetune" / "version_0"
    assert result["log_dir"] == "logs/finetune/version_0"
    assert (run / "metrics.csv").is_file() and (run / "checkpoints" / "best.ckpt").is_file()
    saved = yaml.safe_load((run / "config.yaml").read_text())
    assert saved["finetuning"] == {"milestones": [1, 2], "train_bn": False}
    # trainkit's classes by class name: Lightning's CLI reads the file too (each CLI finds its
    # own class of that name; tests/integration/compat/test_saved_config.py)
    names = [c["class_path"] for c in saved["trainer"]["callbacks"]]
    assert names == ["ModelCheckpoint", "LearningRateMonitor"]
    assert saved["seed_everything"] == 1234 and saved["trainer"]["max_epochs"] == 3


@pytest.mark.timeout(240)
def test_run_false_script_fits_and_tests_with_injected_optimizer_and_scheduler(ours):
    result, folder = ours("cli_run_false")
    assert result["optimizer"] == "SGD" and result["seed"] == 2024 and result["epochs"] == 5
    assert result["lr"] == pytest.approx(0.05 * 0.5**2)  # StepLR(step_size=2) over 5 epochs
    assert result["early_stopping"] == 1 and result["data"] == "Waves"
    assert set(result["fit"]) == {"train_loss", "val_loss"}
    assert set(result["metrics"]) == {"test_loss"} and result["metrics"]["test_loss"] < 1.0
    saved = yaml.safe_load((folder / "runs" / "config.yaml").read_text())
    assert saved["seed_everything"] == 2024
    assert saved["model"]["optimizer"]["class_path"] == "torch.optim.SGD"


@pytest.mark.timeout(240)
def test_plateau_scheduler_follows_the_metric_its_config_names(ours):
    result, folder = ours("cli_plateau")
    assert result["scheduler"] == "ReduceLROnPlateau" and result["monitor"] == "train_loss"
    assert result["lr"] < 0.2  # it stepped on train_loss (no val_loss exists in this program)
    assert result["model"] == "MLPRegressor"
    assert result["reported"] == {
        "stage": "fit",
        "model": "MLPRegressor",
        "scheduler": "ReduceLROnPlateau",
    }
    assert result["early_stopping"] == ["train_loss"] and result["epochs"] == 6
    saved = yaml.safe_load((folder / "logs" / "plateau" / "version_0" / "config.yaml").read_text())
    assert saved["lr_scheduler"]["init_args"]["monitor"] == "train_loss"


@pytest.mark.timeout(240)
def test_a_cli_subclass_reads_every_subcommands_arguments_and_tests_after_fit(ours):
    result, _ = ours("cli_fit_then_test")
    assert result["method_arguments"]["test"] == ["ckpt_path", "verbose", "weights_only"]
    assert set(result["method_arguments"]) == {"fit", "validate", "test", "predict"}
    assert result["metrics"]["test_loss"] < 1.0


@pytest.mark.timeout(240)
def test_run_subcommand_runs_a_subcommand_not_given_on_the_command_line(tmp_path, monkeypatch):
    """trainkit parses only the chosen subcommand; another one run from a hook gets its method
    arguments' defaults (Lightning raises a KeyError here: docs/compat.md)."""
    from tests.integration.compat.programs.cli_fit_then_test import Line, LineData
    from trainkit.cli import LightningCLI

    class FitThenRunTest(LightningCLI):
        def after_fit(self) -> None:
            self._run_subcommand("test")

    monkeypatch.chdir(tmp_path)
    cli = FitThenRunTest(
        Line,
        LineData,
        args=["fit", "--trainer.max_epochs=1", "--trainer.logger=false"],
        trainer_defaults={"enable_progress_bar": False, "accelerator": "cpu"},
        save_config_callback=None,
    )
    assert cli.trainer.state.fn == "test"
    assert "test_loss" in cli.trainer.callback_metrics


@lightning_installed
@pytest.mark.lightning
@pytest.mark.timeout(400)
@pytest.mark.parametrize("program", list(ARGS))
def test_the_same_cli_program_under_lightning_ends_with_the_same_results(tmp_path, ours, program):
    theirs = run_cli_program(program, tmp_path, lightning=True)
    same_values(ours(program)[0], theirs)
