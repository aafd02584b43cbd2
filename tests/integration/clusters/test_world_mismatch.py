"""When srun, torchrun or mpirun start a world other than the config asks for, every rank stops
before training with one line naming both numbers and the fix; nothing trains. A batch script of
a job with several tasks that runs trainkit without srun says to use srun instead of waiting for
ranks that never start. The launches run at once (each ends in its first seconds)."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.integration.clusters.conftest import (
    cluster_config,
    command_line,
    slurm_turn,
    trainkit_command,
)
from trainkit.distributed.ports import find_free_port

pytestmark = pytest.mark.timeout(240)


def launches(tmp_path, mpirun: str | None, slurm) -> dict[str, list[str]]:
    """Each mismatched launch by name, with its own folder (ranks/ appears if one trained)."""

    def fit(name: str, devices: int, *options: str) -> list[str]:
        folder = tmp_path / name
        config = cluster_config(folder, devices=devices)
        return trainkit_command(config, folder / "run", *options)

    found: dict[str, list[str]] = {
        "torchrun": [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc-per-node",
            "2",
            "--master-port",
            str(find_free_port()),
            *fit("torchrun", 3)[1:],  # -m trainkit fit ...
        ],
    }
    if mpirun:
        found["mpirun"] = [mpirun, "--allow-run-as-root", "--oversubscribe", "-np", "2"]
        found["mpirun"] += fit("mpirun", 3)
    if slurm:
        found["srun_devices"] = ["srun", "-n", "2", *fit("srun_devices", 4)]
        found["srun_nodes"] = ["srun", "-n", "1", *fit("srun_nodes", 1, "--trainer.num_nodes", "2")]
        wrap = command_line(fit("sbatch_no_srun", 2))
        log = tmp_path / "sbatch_no_srun" / "job.log"
        found["sbatch_no_srun"] = ["sbatch", "--ntasks=2", "-o", str(log), "--wrap", wrap]
    return found


@pytest.fixture(scope="module")
def refusals(request, tmp_path_factory):
    """name -> (exit code, output) of every mismatched launch this machine can make."""
    with slurm_turn(tmp_path_factory):  # one user of SLURM at a time
        return launch_refusals(request, tmp_path_factory)


def launch_refusals(request, tmp_path_factory):
    tmp_path = tmp_path_factory.mktemp("mismatch")
    optional = {}
    for name in ("slurm", "mpirun"):
        try:
            optional[name] = request.getfixturevalue(name)
        except pytest.skip.Exception:
            optional[name] = None
    slurm = optional["slurm"]
    env = slurm.env if slurm else None
    if env is None:
        from tests.helpers.command_env import cli_env

        env = cli_env()
    env = {**env, "TMPDIR": str(tmp_path)}  # where torchrun makes its own temp folder
    procs = {
        name: subprocess.Popen(
            command,
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for name, command in launches(tmp_path, optional["mpirun"], slurm).items()
    }
    results = {}
    for name, proc in procs.items():
        out, _ = proc.communicate(timeout=360)
        results[name] = (proc.returncode, out)
    if "sbatch_no_srun" in results:
        job = results["sbatch_no_srun"][1].strip().split()[-1]
        code = slurm.wait_job(job)
        results["sbatch_no_srun"] = (code, (tmp_path / "sbatch_no_srun" / "job.log").read_text())
    return tmp_path, results


def refused(refusals, name: str) -> str:
    """The one error line of a refused launch (every rank printed the same one); nothing trained."""
    folder, results = refusals
    if name not in results:
        pytest.skip(f"{name} is not installed here")
    code, output = results[name]
    errors = {line for line in output.splitlines() if line.startswith("trainkit: error:")}
    assert code != 0 and len(errors) == 1, output
    assert not (folder / name / "ranks").exists(), output  # no rank reached training
    if name != "torchrun":  # torchrun adds a traceback of its own agent
        assert "Traceback" not in output, output
    return errors.pop()


@pytest.mark.slurm
def test_srun_with_fewer_tasks_than_devices_is_refused(refusals):
    line = refused(refusals, "srun_devices")
    assert "trainer.devices 4; expected 2, the ranks per node srun started" in line
    assert "set trainer.devices: 2" in line and "srun --ntasks-per-node=4" in line
    assert "or srun --ntasks-per-node=1 and trainkit starts the ranks of each node itself" in line


@pytest.mark.slurm
def test_more_nodes_than_the_job_has_are_refused(refusals):
    line = refused(refusals, "srun_nodes")
    assert "trainer.num_nodes 2; expected 1, the nodes srun runs on" in line
    assert "set trainer.num_nodes: 1" in line and "--nodes=2" in line


@pytest.mark.slurm
def test_a_batch_script_with_two_tasks_but_no_srun_says_to_use_srun(refusals):
    line = refused(refusals, "sbatch_no_srun")
    assert "SLURM_NTASKS 2" in line and "srun trainkit fit" in line


def test_torchrun_with_other_processes_per_node_than_devices_is_refused(refusals):
    line = refused(refusals, "torchrun")
    assert "trainer.devices 3; expected 2, the ranks per node torchrun started" in line
    assert "torchrun --nproc-per-node 3" in line


@pytest.mark.mpi
def test_mpirun_with_other_ranks_than_devices_is_refused(refusals):
    line = refused(refusals, "mpirun")
    assert "trainer.devices 3; expected 2, the ranks per node mpirun started" in line
    assert "OMPI_COMM_WORLD_LOCAL_SIZE=2" in line
