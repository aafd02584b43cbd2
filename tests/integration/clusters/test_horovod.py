"""``strategy: horovod``: the ranks horovodrun (its gloo mode) or mpirun started, their gradients
averaged by horovod's own allreduce where horovod is installed (scripts/install_horovod.sh), by
trainkit's ddp where it is not; either way to the weights of one process given the whole batch,
and of trainkit's own launcher."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.conftest import run_trainkit
from tests.helpers.command_env import cli_env
from tests.integration.clusters.conftest import launch, trainkit_command
from tests.integration.clusters.two_nodes import exact_config
from tests.integration.reliability.runs import assert_same_weights, checkpoints, write_config

pytestmark = [pytest.mark.mpi, pytest.mark.timeout(240)]

HOROVOD_ALLREDUCE = "horovod (horovod's allreduce)"
DDP_INSTEAD = "trainkit: strategy horovod: horovod is not usable"


def horovod_missing() -> str:
    from trainkit.strategies.horovod import horovod_missing as why

    return why()


@pytest.fixture(scope="module")
def horovodrun() -> str:
    """horovodrun, installed with horovod beside this Python, or a skip."""
    if horovod_missing():
        pytest.skip(f"horovod is not installed ({horovod_missing()}): scripts/install_horovod.sh")
    path = Path(sys.executable).with_name("horovodrun")
    assert path.exists(), f"horovod is importable but {path} is missing"
    return str(path)


@pytest.fixture(scope="module")
def one_process(tmp_path_factory) -> Path:
    """last.ckpt of one process given both ranks' batches (8), accumulating 2 batches a step."""
    folder = tmp_path_factory.mktemp("one_process")
    config = exact_config(folder, devices=1, batch_size=8)
    fit = trainkit_command(config, folder / "run", "--trainer.accumulate_grad_batches", "2")
    done = run_trainkit(*fit[3:], cwd=folder)
    assert done.returncode == 0, done.stderr
    return checkpoints(folder / "run")["last.ckpt"]


def horovod_fit(config: Path, root: Path, accumulate: int = 1, *options: str) -> list[str]:
    """``python -m trainkit fit`` with strategy horovod, writing under ``root`` (the startup
    table shown: it names the strategy)."""
    horovod = ("--trainer.strategy", "horovod", "--trainer.enable_progress_bar", "true")
    return trainkit_command(
        config, root, *horovod, "--trainer.accumulate_grad_batches", str(accumulate), *options
    )


def ranks_recorded(folder: Path) -> list[tuple[int, int, int]]:
    """(global rank, local rank, node rank) of each rank's RankRecorder record."""
    records = [json.loads(path.read_text()) for path in sorted(folder.glob("ranks/rank*.json"))]
    return [(r["global_rank"], r["local_rank"], r["node_rank"]) for r in records]


def test_horovodrun_averages_with_horovods_allreduce_to_the_weights_of_one_process(
    horovodrun, one_process, tmp_path, no_leftovers
):
    """2 ranks x batch 4, accumulating 2 batches: horovod's hooks hold the first backward's
    allreduce and reduce the accumulated gradients once, as one process with batch 8."""
    config = exact_config(tmp_path, devices=2)
    command = [horovodrun, "--gloo", "-np", "2", "-H", "localhost:2"]
    done = launch([*command, *horovod_fit(config, tmp_path / "run", 2)], tmp_path, cli_env())
    assert done.returncode == 0, done.stdout
    assert HOROVOD_ALLREDUCE in done.stdout, done.stdout  # the startup table's strategy row
    assert ranks_recorded(tmp_path) == [(0, 0, 0), (1, 1, 0)]
    assert_same_weights(one_process, checkpoints(tmp_path / "run")["last.ckpt"])
    assert "Traceback" not in done.stdout and "skip_synchronize" not in done.stdout, done.stdout


def test_mpirun_with_strategy_horovod_trains_like_one_process_and_ends_cleanly(
    mpirun, one_process, tmp_path, no_leftovers
):
    """Under mpirun (horovodrun's MPI mode runs it): horovod's allreduce over MPI where horovod
    is installed, and MPI is finalized (else mpirun calls the end improper); trainkit's ddp over
    the same ranks, saying so once, where it is not."""
    config = exact_config(tmp_path, devices=2)
    mpi = [mpirun, "--allow-run-as-root", "--oversubscribe", "-np", "2"]
    done = launch([*mpi, *horovod_fit(config, tmp_path / "run", 2)], tmp_path, cli_env())
    assert done.returncode == 0, done.stdout
    assert "improperly" not in done.stdout, done.stdout
    if horovod_missing():
        assert done.stdout.count(DDP_INSTEAD) == 1, done.stdout  # rank 0 says it, once
        assert "horovod (trainkit's ddp" in done.stdout, done.stdout
    else:
        assert HOROVOD_ALLREDUCE in done.stdout, done.stdout
    assert ranks_recorded(tmp_path) == [(0, 0, 0), (1, 1, 0)]
    assert_same_weights(one_process, checkpoints(tmp_path / "run")["last.ckpt"])


def test_horovodrun_resumes_adam_and_its_schedule_exactly(
    horovodrun, straight_run, tmp_path, no_leftovers
):
    """Adam with a step schedule (the reliability regressor): ddp's step-5 checkpoint resumed
    under horovodrun (rank 0's optimizer state broadcast, synchronization still trainkit's)
    ends with the weights of ddp's own run to the end."""
    config = write_config(tmp_path, devices=2)
    reference = straight_run(2)
    step5 = reference.with_name("epoch=0-step=5.ckpt")
    command = [horovodrun, "--gloo", "-np", "2"]
    resumed = horovod_fit(config, tmp_path / "resumed", 1, "--ckpt_path", str(step5))
    done = launch([*command, *resumed], tmp_path, cli_env())
    assert done.returncode == 0, done.stdout
    assert "resuming at epoch 0, step 5" in done.stdout, done.stdout
    assert HOROVOD_ALLREDUCE in done.stdout, done.stdout
    assert "skip_synchronize" not in done.stdout, done.stdout  # horovod's warning: synced twice
    assert_same_weights(reference, checkpoints(tmp_path / "resumed")["last.ckpt"])


def test_several_ranks_of_strategy_horovod_need_horovodrun_or_mpirun(tmp_path):
    """trainkit starts no ranks for horovod: asked for 2 on its own, one line says how."""
    config = exact_config(tmp_path, devices=2)
    done = run_trainkit(*horovod_fit(config, tmp_path / "run")[3:], cwd=tmp_path)
    errors = [line for line in done.stderr.splitlines() if line.startswith("trainkit: error:")]
    assert done.returncode == 2, done.stderr
    assert len(errors) == 1 and "horovodrun -np 2 trainkit fit" in errors[0], done.stderr
    assert not (tmp_path / "run").exists()
