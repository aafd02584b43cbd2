"""A real single-node SLURM (munged, slurmctld and slurmd from Debian's slurm-wlm, configured for
this machine in a folder of its own) shared by the session, a real mpirun, and the launches the
cluster tests make. Tests skip, saying why, where the programs are not installed.

Under pytest-xdist the workers share one cluster (the first to need it starts it, the last to
finish stops it) and take turns: a test marked ``slurm`` holds a lock every worker sees for its
whole run, so SLURM tests never run at once, whichever worker the scheduler gives them to
(``xdist_group`` only keeps them in one worker where the pytest and pytest-xdist in use agree
on it; the lock does not depend on that)."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest
import yaml
from filelock import FileLock

from tests.helpers.command_env import REPO, cli_env
from tests.helpers.session_runs import made_once
from tests.helpers.sessions import run_in_session
from tests.integration.clusters import two_nodes
from tests.integration.reliability.conftest import straight_run  # noqa: F401  (the never-interrupted run)
from tests.integration.reliability.runs import write_config
from trainkit.distributed.ports import find_free_port

SLURM_PROGRAMS = ("munged", "slurmctld", "slurmd", "srun", "sbatch", "salloc", "scontrol", "sinfo")
READY_SECONDS = 120.0  # a ceiling: the daemons are up in a few seconds
FINISHED = (
    "COMPLETED",
    "FAILED",
    "CANCELLED",
    "TIMEOUT",
    "NODE_FAIL",
    "OUT_OF_MEMORY",
    "PREEMPTED",
)
PYTHON = sys.executable

SLURM_CONF = """\
ClusterName=trainkit-tests
SlurmctldHost={host}(127.0.0.1)
SlurmctldPort={ctld_port}
SlurmdPort={slurmd_port}
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={state}/munge.socket,cred_expire=5
CredType=cred/munge
StateSaveLocation={state}/ctld
SlurmdSpoolDir={state}/spool
SlurmctldPidFile={state}/slurmctld.pid
SlurmdPidFile={state}/slurmd.pid
SlurmctldLogFile={state}/slurmctld.log
SlurmdLogFile={state}/slurmd.log
PlugStackConfig={state}/plugstack.conf
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/builtin
SchedulerParameters=sched_interval=1
MpiDefault=none
SwitchType=switch/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SlurmdParameters=config_overrides
JobRequeue=1
ReturnToService=2
KillWait=2
MinJobAge=600
InactiveLimit=0
NodeName={host} NodeAddr=127.0.0.1 CPUs={cpus} State=UNKNOWN
PartitionName=tests Nodes={host} Default=YES MaxTime=INFINITE State=UP
"""


@dataclass
class SlurmCluster:
    """The daemons this session started, and how to talk to them."""

    state: Path
    env: dict[str, str]
    daemons: list[subprocess.Popen] = field(default_factory=list)  # started by this process
    pids: list[int] = field(
        default_factory=list
    )  # munged, slurmctld, slurmd (whoever started them)

    def record(self) -> dict[str, object]:
        """What another pytest-xdist worker needs to use (and stop) this cluster."""
        return {"state": str(self.state), "env": self.env, "pids": self.pids}

    @classmethod
    def from_record(cls, record: dict) -> SlurmCluster:
        return cls(Path(record["state"]), record["env"], pids=record["pids"])

    def run(self, *command: str, timeout: float = 60) -> subprocess.CompletedProcess:
        return subprocess.run(
            command, env=self.env, capture_output=True, text=True, timeout=timeout, check=False
        )

    def job_field(self, job: str, name: str) -> str:
        """One field of ``scontrol show job`` (``JobState``, ``Restarts``...)."""
        shown = self.run("scontrol", "show", "job", "-o", job).stdout.split()
        return next((item.split("=", 1)[1] for item in shown if item.startswith(f"{name}=")), "")

    def submit(self, *options: str) -> str:
        """``sbatch --parsable OPTIONS``: the job id."""
        done = self.run("sbatch", "--parsable", *options)
        assert done.returncode == 0, done.stderr
        return done.stdout.strip().split(";")[0]

    def wait_for_state(self, job: str, states: tuple[str, ...], timeout: float = 300) -> str:
        """Poll the job until its state is one of ``states`` (sbatch --wait polls every 10 s)."""
        deadline = time.monotonic() + timeout
        while (state := self.job_field(job, "JobState")) not in states:
            assert time.monotonic() < deadline, f"job {job} still {state} after {timeout} s"
            time.sleep(0.1)
        return state

    def wait_job(self, job: str, timeout: float = 300) -> int:
        """Wait for a batch job to end; its exit code (128 + N when a signal N ended it)."""
        self.wait_for_state(job, FINISHED, timeout)
        code, _, signum = self.job_field(job, "ExitCode").partition(":")
        return int(code) or (128 + int(signum) if signum.isdigit() and int(signum) else 0)

    def logs(self) -> str:
        tails = []
        for name in ("munged.log", "slurmctld.log", "slurmd.log"):
            path = self.state / name
            if path.exists():
                tails.append(f"--- {name}\n" + "\n".join(path.read_text().splitlines()[-15:]))
        return "\n".join(tails)

    def running(self) -> list[psutil.Process]:
        """The cluster's daemons that still run (an ended one may wait to be reaped)."""
        alive = []
        for pid in self.pids:
            with contextlib.suppress(psutil.NoSuchProcess):
                process = psutil.Process(pid)
                if process.status() != psutil.STATUS_ZOMBIE:
                    alive.append(process)
        return alive

    def stop(self) -> None:
        """Cancel what is left of the tests' jobs, then stop only the daemons started for this
        cluster (by this process or another pytest-xdist worker)."""
        daemons = self.running()
        if len(daemons) == len(self.pids):
            self.run("scancel", "--user", str(os.getuid()), timeout=60)
            deadline = time.monotonic() + 60
            while self.run("squeue", "-h", timeout=60).stdout.strip():
                if time.monotonic() > deadline:
                    break
                time.sleep(0.2)
        for daemon in reversed(daemons):
            with contextlib.suppress(psutil.NoSuchProcess):
                daemon.terminate()
        deadline = time.monotonic() + 30
        while (left := self.running()) and time.monotonic() < deadline:
            time.sleep(0.1)
        for daemon in left:
            with contextlib.suppress(psutil.NoSuchProcess):
                daemon.kill()
        for daemon in self.daemons:  # reap this process's own children (none left running)
            try:
                daemon.wait(timeout=30)
            except subprocess.TimeoutExpired:
                daemon.kill()
                daemon.wait()


def start_slurm(state: Path) -> SlurmCluster:
    """munged, slurmctld and slurmd in the foreground, for this host and its cores; returns
    once sinfo shows the node idle."""
    state.chmod(0o755)
    key = state / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o600)
    (state / "plugstack.conf").write_text("")
    host = socket.gethostname().split(".")[0]
    conf = state / "slurm.conf"
    conf.write_text(
        SLURM_CONF.format(
            host=host,
            state=state,
            ctld_port=find_free_port(),
            slurmd_port=find_free_port(),
            cpus=max(4, os.cpu_count() or 1),
        )
    )
    env = {k: v for k, v in cli_env().items() if not k.startswith(("SLURM_", "SBATCH_", "SALLOC_"))}
    env["SLURM_CONF"] = str(conf)
    cluster = SlurmCluster(state, env)
    commands = [
        [
            "munged",
            "--foreground",
            "--force",
            f"--socket={state}/munge.socket",
            f"--key-file={key}",
            f"--log-file={state}/munged.log",
            f"--pid-file={state}/munged.pid",
            f"--seed-file={state}/munged.seed",
        ],
        ["slurmctld", "-D", "-f", str(conf)],
        ["slurmd", "-D", "-f", str(conf), "-N", host],
    ]
    for command in commands:
        log = (state / f"{command[0]}.out").open("w")
        cluster.daemons.append(
            subprocess.Popen(command, env=env, stdout=log, stderr=subprocess.STDOUT)
        )
        cluster.pids.append(cluster.daemons[-1].pid)
        if command[0] == "munged":
            wait_until(lambda: (state / "munge.socket").exists(), "munged's socket", cluster)
    wait_until(
        lambda: cluster.run("sinfo", "-h", "-o", "%T").stdout.strip() == "idle",
        "the node to be idle in sinfo",
        cluster,
    )
    return cluster


def wait_until(ready, what: str, cluster: SlurmCluster, seconds: float = READY_SECONDS) -> None:
    deadline = time.monotonic() + seconds
    while not ready():
        dead = [d.args[0] for d in cluster.daemons if d.poll() is not None]
        if dead or time.monotonic() > deadline:
            cluster.stop()
            pytest.fail(f"SLURM did not start ({what}; exited: {dead})\n{cluster.logs()}")
        time.sleep(0.1)


@pytest.fixture(scope="session")
def slurm(tmp_path_factory):
    """The session's single-node SLURM cluster (started on first use, stopped at the end; under
    pytest-xdist one cluster for all workers)."""
    missing = [name for name in SLURM_PROGRAMS if shutil.which(name) is None]
    if missing:
        pytest.skip(
            f"SLURM is not installed ({', '.join(missing)} missing): apt-get install "
            "slurm-wlm munge"
        )
    if os.geteuid() != 0:
        pytest.skip("starting slurmd needs root")
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if worker is None:
        cluster = start_slurm(tmp_path_factory.mktemp("slurm"))
        yield cluster
        cluster.stop()
        return
    with shared_cluster(tmp_path_factory.getbasetemp().parent / "slurm", worker) as cluster:
        yield cluster


@contextlib.contextmanager
def shared_cluster(shared: Path, worker: str):
    """The cluster every pytest-xdist worker of this run uses (``shared``: a folder they all
    see): the first worker to ask starts it, each records itself as a user, and the last one
    to leave stops it, so two clusters, whose daemons would interfere, never run at once."""
    shared.mkdir(exist_ok=True)
    record, users = shared / "cluster.json", shared / "users"
    users.mkdir(exist_ok=True)
    with FileLock(str(shared / "cluster.lock")):
        if record.is_file():
            cluster = SlurmCluster.from_record(json.loads(record.read_text()))
        else:
            state = Path(tempfile.mkdtemp(prefix="cluster-", dir=shared))
            cluster = start_slurm(state)
            record.write_text(json.dumps(cluster.record()))
        (users / worker).touch()
    try:
        yield cluster
    finally:
        with FileLock(str(shared / "cluster.lock")):
            (users / worker).unlink(missing_ok=True)
            if not any(users.iterdir()):
                record.unlink(missing_ok=True)
                cluster.stop()


def slurm_turn(tmp_path_factory: pytest.TempPathFactory) -> contextlib.AbstractContextManager:
    """Held while SLURM is used: under pytest-xdist a lock every worker of this run sees, so
    one SLURM test runs at a time (the jobs of two would queue behind each other's)."""
    if os.environ.get("PYTEST_XDIST_WORKER") is None:
        return contextlib.nullcontext()
    return FileLock(str(tmp_path_factory.getbasetemp().parent / "slurm-turn.lock"))


@pytest.fixture(autouse=True)
def slurm_test_turn(request, tmp_path_factory):
    """A test marked ``slurm`` runs while no other worker's SLURM test does."""
    if request.node.get_closest_marker("slurm") is None:
        yield
        return
    with slurm_turn(tmp_path_factory):
        yield


@pytest.fixture(scope="session")
def exact_references(tmp_path_factory, worker_id) -> dict[str, Path]:
    """The two-node tests' references, made once in the session (the SLURM and the namespace
    tests run in different workers): "1x4" and "1x1" last.ckpt (tests/integration/clusters/two_nodes.py)."""
    from tests.integration.clusters.two_nodes import reference_runs

    return made_once(tmp_path_factory, worker_id, "exact_references", reference_runs)


@pytest.fixture(scope="session")
def mpirun():
    """The path of OpenMPI's mpirun, or a skip."""
    path = shutil.which("mpirun")
    if path is None:
        pytest.skip("mpirun is not installed: apt-get install openmpi-bin")
    return path


@pytest.fixture
def launched(tmp_path, no_leftovers):
    """Starts processes inside namespace nodes; kills what is left of them after the test."""
    started = two_nodes.Launched(tmp_path)
    yield started
    started.stop()


def cluster_config(folder: Path, devices: int = 2, model: str = "NoisyRegressor", **init) -> Path:
    """The reliability tests' fit config (tests.helpers.resumable) with ``model`` from
    tests.helpers.resumable or tests.integration.clusters.models, and each rank's record under ranks/."""
    folder.mkdir(parents=True, exist_ok=True)
    path = write_config(folder, devices=devices)
    config = yaml.safe_load(path.read_text())
    module = (
        "tests.helpers.resumable"
        if model == "NoisyRegressor"
        else "tests.integration.clusters.models"
    )
    config["model"] = {"class_path": f"{module}.{model}", "init_args": init}
    config["trainer"]["callbacks"].append(
        {
            "class_path": "tests.integration.clusters.models.RankRecorder",
            "init_args": {"folder": str(folder / "ranks")},
        }
    )
    path.write_text(yaml.safe_dump(config))
    return path


def trainkit_command(config: Path, root: Path, *options: str) -> list[str]:
    """``python -m trainkit fit -c CONFIG`` writing under ``root``."""
    return [
        PYTHON,
        "-m",
        "trainkit",
        "fit",
        "-c",
        str(config),
        "--trainer.default_root_dir",
        str(root),
        *options,
    ]


def launch(command: list[str], cwd: Path, env: dict[str, str], timeout: float = 150):
    """Run a launcher command to its end (stopping its whole session past ``timeout``)."""
    code, out = run_in_session(command, cwd, env, timeout)
    if code is None:
        pytest.fail(f"{command[0]} still running after {timeout} s:\n{out}")
    return subprocess.CompletedProcess(command, code, out, "")


def shell(script: str) -> list[str]:
    return ["bash", "-c", f"set -e\n{script}"]


def q(value: object) -> str:
    """A value quoted for bash."""
    import shlex

    return shlex.quote(str(value))


def command_line(command: list[str]) -> str:
    return " ".join(q(part) for part in command)


__all__ = ["REPO"]
