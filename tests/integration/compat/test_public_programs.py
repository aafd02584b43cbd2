"""Programs after real public Lightning 2.x programs (tests/integration/compat/programs/, each header names
its source and what differs): each trains under trainkit in one process with its imports
changed, and, where Lightning is installed, the same file with Lightning's imports ends with the
same metrics.

- backbone_classifier: Lightning's examples/pytorch/basics/backbone_image_classifier.py
- hydra_template_mnist: ashleve/lightning-hydra-template's MNIST module, data module and train.py
- reverse_transformer: Lightning-AI/tutorials, UvA-DL tutorial 5 (Transformers), reversal task
- cifar10_baseline: Lightning-AI/tutorials, lightning_examples/cifar10-baseline (with SWA)
"""

from __future__ import annotations

import math
import shutil

import pytest
import yaml

from tests.integration.compat.ported import run_program, same_values

# each program's trainkit run serves two tests: they share one pytest-xdist worker
pytestmark = pytest.mark.xdist_group("compat_public_programs")
lightning_installed = pytest.mark.skipif(
    __import__("importlib").util.find_spec("lightning") is None,
    reason="Lightning is not installed (pip install 'lightning==2.6.*' to compare with it)",
)

ARGS = {
    "backbone_classifier": ("--trainer.max_epochs=2", "--model.learning_rate=0.001"),
    "hydra_template_mnist": ("3",),
    "reverse_transformer": ("4",),
    "cifar10_baseline": (),
}


@pytest.fixture(scope="module")
def ours(tmp_path_factory):
    """``ours(program)``: (what it wrote, its folder) from one trainkit run, made once."""
    runs: dict[str, tuple[dict, object]] = {}

    def run(program: str) -> tuple[dict, object]:
        if program not in runs:
            folder = tmp_path_factory.mktemp(program)
            runs[program] = (run_program(program, folder, *ARGS[program]), folder)
        return runs[program]

    return run


def finite(values: dict) -> bool:
    return all(math.isfinite(value) for value in values.values())


@pytest.mark.timeout(240)
def test_backbone_classifier_cli_fits_tests_and_predicts_from_the_best_checkpoint(ours):
    result, folder = ours("backbone_classifier")
    assert finite(result["fit"]) and finite(result["metrics"] | result["test"])
    assert set(result["fit"]) == {
        "train_loss",
        "train_loss_step",
        "train_loss_epoch",
        "valid_loss",
        "valid_loss_epoch",
    }
    assert result["tested"] == [result["test"]] and result["test"]["test_loss"] < 2.3
    assert result["predictions"] == [[32, 10]] * 4  # the 128 test images, in batches of 32
    assert result["hparams"] == {"learning_rate": 0.001}  # the backbone left out
    assert result["best"] == "epoch=1-step=28.ckpt" and result["torchvision"] is False
    run = folder / "trainkit_logs" / "version_0"
    assert result["log_dir"] == str(run)
    assert (run / "checkpoints" / result["best"]).is_file()
    assert yaml.safe_load((run / "config.yaml").read_text())["seed_everything"] == 1234


@pytest.mark.timeout(240)
def test_hydra_template_module_tracks_the_best_accuracy_and_tests_the_best_checkpoint(ours):
    result, folder = ours("hydra_template_mnist")
    fit, test = result["fit"], result["metrics"]
    assert finite(fit) and finite(test) and set(test) == {"test/loss", "test/acc"}
    assert fit["val/acc_best"] == result["best_score"] >= fit["val/acc"]  # read before reset
    assert fit["val/acc_best"] > 0.3 and test["test/acc"] > 0.3  # ten classes
    assert result["prepared"] == 2 and result["batch_size_per_device"] == 64
    run = folder / "logs" / "train" / "runs" / "0"
    saved = {path.name for path in (run / "checkpoints").iterdir()}
    assert saved == {result["best"], "last.ckpt"} and result["best"].startswith("epoch_00")
    hparams = yaml.safe_load((run / "csv" / "version_0" / "hparams.yaml").read_text())
    assert "net" not in hparams  # save_hyperparameters(logger=False)
    assert (run / "csv" / "version_0" / "metrics.csv").is_file()


@pytest.mark.timeout(240)
def test_hydra_template_hyperparameters_logged_by_the_script_reach_hparams_yaml(ours):
    """Its train.py logs the parameter counts and seed itself: CSVLogger adds them to
    hparams.yaml beside the module's, as Lightning's."""
    _, folder = ours("hydra_template_mnist")
    run = folder / "logs" / "train" / "runs" / "0" / "csv" / "version_0"
    hparams = yaml.safe_load((run / "hparams.yaml").read_text())
    assert hparams["model/params/total"] > 0 and hparams["seed"] == 12345


@pytest.mark.timeout(240)
def test_reverse_transformer_steps_its_scheduler_from_optimizer_step(ours):
    result, folder = ours("reverse_transformer")
    assert finite(result["fit"]) and finite(result["metrics"])
    assert result["steps"] == 4 * 32 and result["lr"] == pytest.approx(0.0, abs=1e-12)
    assert result["result"]["test_acc"] == result["metrics"]["test_acc"] > 0.2  # chance: 0.1
    assert result["result"]["val_acc"] > 0.2
    assert result["best"].startswith("ReverseTask/trainkit_logs/version_0/checkpoints/epoch=")
    assert (folder / result["best"]).is_file()


@pytest.mark.timeout(240)
def test_reverse_transformer_loads_its_saved_weights_only_checkpoint(ours, tmp_path):
    """The tutorial's other branch: a ReverseTask.ckpt found is loaded, not trained."""
    trained, folder = ours("reverse_transformer")
    shutil.copy(folder / trained["best"], tmp_path / "ReverseTask.ckpt")
    result = run_program("reverse_transformer", tmp_path, *ARGS["reverse_transformer"])
    assert result["fit"] is None and result["steps"] == 0
    assert result["hparams"] == trained["hparams"]
    if trained["best"].endswith(f"step={trained['steps']}.ckpt"):  # the best was the last
        assert result["result"] == pytest.approx(trained["result"], abs=1e-6)


@pytest.mark.timeout(240)
def test_cifar10_baseline_then_stochastic_weight_averaging_in_a_second_trainer(ours):
    result, folder = ours("cifar10_baseline")
    assert finite(result["first_fit"]) and finite(result["first_test"])
    assert finite(result["swa_fit"]) and finite(result["metrics"])
    assert result["averaged"] == 2 and result["swa_hparams"] == {"lr": 0.01}
    assert result["first_test"]["test_acc"] > 0.2 and result["metrics"]["test_acc"] > 0.2
    assert result["log_dirs"] == [
        "lightning_logs/resnet/version_0",
        "lightning_logs/swa_resnet/version_0",
    ]
    for name in ("resnet", "swa_resnet"):
        run = folder / "lightning_logs" / name / "version_0"
        assert list(run.glob("events.out.tfevents.*")) and list(run.glob("checkpoints/*.ckpt"))


# what the frameworks name differently on purpose (docs/compat.md): log folders, Lightning's
# internal `_instantiator` hyperparameter (a LightningCLI model)
DIFFERENT_ON_PURPOSE = {"log_dir", "best"}


@lightning_installed
@pytest.mark.lightning
@pytest.mark.timeout(400)
@pytest.mark.parametrize("program", list(ARGS))
def test_the_same_public_program_under_lightning_ends_with_the_same_results(
    ours, tmp_path, program
):
    theirs = run_program(program, tmp_path, *ARGS[program], lightning=True)
    mine, _ = ours(program)
    for result in (mine, theirs):
        if "hparams" in result:
            result["hparams"] = {k: v for k, v in result["hparams"].items() if k[0] != "_"}
        if "best" in result:
            result["best"] = result["best"].rpartition("/")[2]
        result.pop("log_dir", None)
    same_values(mine, theirs)
