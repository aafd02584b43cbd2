"""Lightning programs ported by changing imports only (tests/integration/compat/programs/): each trains
under trainkit; where Lightning is installed, the same file with Lightning's imports trains to
the same metrics."""

from __future__ import annotations

import math

import pytest

from tests.integration.compat.ported import run_program

# the classifier's one-process run serves two tests: they share one pytest-xdist worker
pytestmark = pytest.mark.xdist_group("compat_programs")
lightning_installed = pytest.mark.skipif(
    __import__("importlib").util.find_spec("lightning") is None,
    reason="Lightning is not installed (pip install 'lightning==2.6.*' to compare with it)",
)


@pytest.mark.distributed
@pytest.mark.timeout(300)
def test_gan_with_two_manual_backwards_trains_on_two_ddp_ranks(tmp_path):
    result = run_program("gan", tmp_path, "2", ranks=2)
    assert all(math.isfinite(value) for value in result["metrics"].values())
    assert set(result["metrics"]) == {"g_loss", "d_loss"}
    first, second = result["checksums"]
    assert first == pytest.approx(second, abs=1e-9)


@pytest.fixture(scope="module")
def one_process_run(tmp_path_factory):
    """``one_process_run(program)``: what the program wrote when it ran under trainkit in one
    process, run once for the test of the program and its comparison with Lightning."""
    done: dict[str, tuple] = {}

    def run(program: str) -> tuple:
        if program not in done:
            folder = tmp_path_factory.mktemp(program)
            done[program] = (run_program(program, folder, "1"), folder)
        return done[program]

    return run


@pytest.mark.timeout(300)
def test_classifier_with_metric_objects_checkpoints_and_early_stopping(one_process_run):
    result, tmp_path = one_process_run("classifier")
    assert result["metrics"]["test_acc"] > 0.9
    assert result["best_score"] == pytest.approx(result["fit"]["val_acc"], abs=0.05)
    assert set(result["metrics"]) == {"test_acc"}  # a stage starts with no metrics of the last
    assert list((tmp_path / "logs").glob("*/version_0/metrics.csv"))


def same_metrics(ours: dict, theirs: dict, tolerance: float = 1e-6) -> None:
    assert set(ours) == set(theirs)
    for name, value in theirs.items():
        assert ours[name] == pytest.approx(value, abs=tolerance), name


@lightning_installed
@pytest.mark.lightning
@pytest.mark.timeout(400)
@pytest.mark.parametrize("program", ["classifier", "gan"])
def test_the_same_program_under_lightning_ends_with_the_same_metrics(
    one_process_run, tmp_path, program
):
    theirs = run_program(program, tmp_path / "lightning", "1", lightning=True)
    ours, _ = one_process_run(program)
    same_metrics(ours["metrics"], theirs["metrics"])
    if "fit" in theirs:
        same_metrics(ours["fit"], theirs["fit"])


@pytest.mark.distributed
@pytest.mark.timeout(300)
def test_a_hydra_app_on_two_ranks_writes_one_run_folder(tmp_path):
    pytest.importorskip("hydra", reason="hydra-core is not installed")
    result = run_program("hydra_app", tmp_path, "trainer.devices=2", ranks=2)
    assert result["world"] == 2 and result["metrics"]["val_acc"] > 0.9
    (run,) = tmp_path.glob("outputs/*/*")  # one folder: the second rank reused the first's
    assert str(run) == result["output_dir"]
    assert (run / ".hydra" / "config.yaml").is_file()
    assert list(run.glob("trainkit_logs/version_0/checkpoints/*.ckpt"))
