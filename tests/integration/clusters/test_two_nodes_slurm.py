"""SLURM on two nodes: Debian's slurmd, one in each of two network namespaces (two hosts on
this machine, tests/integration/clusters/netns.py), slurmctld in node 0's. ``srun -N 2`` and ``sbatch -N 2``
jobs train across them to the weights of 1 node x 4 ranks and of one process.

This cluster is the tests' own (its own state folder, munged socket and namespaces); it never
touches the single-node cluster of tests/integration/clusters/conftest.py. Node names (n0, n1) do not
resolve here, as they would through a cluster's DNS, so the jobs pass rank 0's address
(MASTER_ADDR) themselves."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.helpers.command_env import cli_env
from tests.integration.clusters.conftest import (
    SLURM_PROGRAMS,
    SlurmCluster,
    command_line,
    q,
    trainkit_command,
    wait_until,
)
from tests.integration.clusters.netns import Node, nodes_or_skip
from tests.integration.clusters.two_nodes import (
    assert_trained_like_one_node_and_one_process,
    exact_config,
    ranks_ran,
)

pytestmark = [pytest.mark.slow, pytest.mark.slurm, pytest.mark.timeout(300)]

CONF = """\
ClusterName=trainkit-two-nodes
SlurmctldHost={host}({main})
SlurmctldPort=6817
SlurmdPort=6818
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket={state}/munge.socket,cred_expire=5
CredType=cred/munge
StateSaveLocation={state}/ctld
SlurmdSpoolDir={state}/spool-%n
SlurmctldPidFile={state}/slurmctld.pid
SlurmdPidFile={state}/slurmd-%n.pid
SlurmctldLogFile={state}/slurmctld.log
SlurmdLogFile={state}/slurmd-%n.log
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
ReturnToService=2
KillWait=2
MinJobAge=600
InactiveLimit=0
{nodes}
PartitionName=tests Nodes=n[0-{last}] Default=YES MaxTime=INFINITE State=UP
"""


class TwoNodeSlurm(SlurmCluster):
    """The SLURM of the two nodes: its commands run on node 0 (where slurmctld listens)."""

    node: Node

    def run(self, *command: str, timeout: float = 60) -> subprocess.CompletedProcess:
        return subprocess.run(
            self.node.command(list(command)),
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def logs(self) -> str:
        tails = []
        for path in sorted(self.state.glob("*.log")):
            tails.append(f"--- {path.name}\n" + "\n".join(path.read_text().splitlines()[-15:]))
        return "\n".join(tails)


def start_two_node_slurm(state: Path, nodes: list[Node]) -> TwoNodeSlurm:
    """munged (its socket is a file every namespace sees), slurmctld on node 0 and a slurmd on
    each node; returns once sinfo shows both nodes idle."""
    state.chmod(0o755)
    key = state / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o600)
    (state / "plugstack.conf").write_text("")
    lines = [f"NodeName=n{n.index} NodeAddr={n.address} CPUs=4 State=UNKNOWN" for n in nodes]
    conf = state / "slurm.conf"
    conf.write_text(
        CONF.format(
            host=os.uname().nodename.split(".")[0],  # slurmctld runs on this host's name
            main=nodes[0].address,
            state=state,
            nodes="\n".join(lines),
            last=len(nodes) - 1,
        )
    )
    env = {k: v for k, v in cli_env().items() if not k.startswith(("SLURM_", "SBATCH_", "SALLOC_"))}
    env["SLURM_CONF"] = str(conf)
    cluster = TwoNodeSlurm(state, env)
    cluster.node = nodes[0]
    munged = [
        "munged", "--foreground", "--force", f"--socket={state}/munge.socket",
        f"--key-file={key}", f"--log-file={state}/munged.log", f"--pid-file={state}/munged.pid",
        f"--seed-file={state}/munged.seed",
    ]  # fmt: skip
    commands = [(munged, None), (["slurmctld", "-D", "-f", str(conf)], nodes[0])]
    for node in nodes:
        (state / f"spool-n{node.index}").mkdir()
        commands.append((["slurmd", "-D", "-f", str(conf), "-N", f"n{node.index}"], node))
    for command, node in commands:
        log = (state / f"{command[0]}{node.index if node else ''}.out").open("w")
        argv = node.command(command) if node else command
        daemon = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT)
        cluster.daemons.append(daemon)
        cluster.pids.append(daemon.pid)  # what stop() signals
        if node is None:
            wait_until(lambda: (state / "munge.socket").exists(), "munged's socket", cluster)
    idle = f"n[0-{len(nodes) - 1}] idle"
    wait_until(
        lambda: cluster.run("sinfo", "-h", "-o", "%N %T").stdout.strip() == idle,
        f"both nodes idle in sinfo ({idle})",
        cluster,
    )
    return cluster


@pytest.fixture(scope="module")
def nodes():
    with nodes_or_skip(2, tag="sl") as made:
        yield made


@pytest.fixture(scope="module")
def slurm2(nodes, tmp_path_factory):
    """The two-node SLURM of this module (started here, stopped at its end)."""
    missing = [name for name in SLURM_PROGRAMS if shutil.which(name) is None]
    if missing:
        pytest.skip(
            f"SLURM is not installed ({', '.join(missing)} missing): apt-get install slurm-wlm munge"
        )
    cluster = start_two_node_slurm(tmp_path_factory.mktemp("slurm2"), nodes)
    yield cluster
    cluster.stop()


def test_srun_on_two_nodes_with_a_task_per_rank(
    slurm2, nodes, exact_references, tmp_path, no_leftovers
):
    """``srun -N 2 --ntasks-per-node 2``: SLURM starts the 4 ranks, 2 on each node."""
    config = exact_config(tmp_path)
    command = [
        "srun", "-N", "2", "--ntasks-per-node", "2", "--kill-on-bad-exit=1",
        f"--export=ALL,MASTER_ADDR={nodes[0].address}",
        *trainkit_command(config, tmp_path / "run", "--trainer.num_nodes", "2"),
    ]  # fmt: skip
    done = slurm2.run(*command, timeout=360)
    assert done.returncode == 0, done.stdout + done.stderr + slurm2.logs()
    assert ranks_ran(tmp_path) == {0: 0, 1: 0, 2: 1, 3: 1}
    assert_trained_like_one_node_and_one_process(tmp_path, exact_references)


def test_sbatch_on_two_nodes_where_trainkit_starts_each_nodes_ranks(
    slurm2, nodes, exact_references, tmp_path, no_leftovers
):
    """``sbatch -N 2``, one srun task per node: trainkit's launcher in each starts that node's 2
    ranks, and the two launchers meet on the port SLURM's job and step give them."""
    config = exact_config(tmp_path)
    run = trainkit_command(config, tmp_path / "run", "--trainer.num_nodes", "2")
    script = tmp_path / "job.sh"
    script.write_text(
        "#!/bin/bash\n"
        "#SBATCH --nodes=2\n"
        "#SBATCH --ntasks-per-node=1\n"
        f"#SBATCH --output={tmp_path / 'job.out'}\n"
        f"export MASTER_ADDR={q(nodes[0].address)}\n"
        f"srun --kill-on-bad-exit=1 {command_line(run)}\n"
    )
    job = slurm2.submit(str(script))
    code = slurm2.wait_job(job, timeout=360)
    out = (tmp_path / "job.out").read_text() if (tmp_path / "job.out").exists() else ""
    assert code == 0, out + slurm2.logs()
    assert ranks_ran(tmp_path) == {0: 0, 1: 0, 2: 1, 3: 1}
    assert_trained_like_one_node_and_one_process(tmp_path, exact_references)
