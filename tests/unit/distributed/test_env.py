"""Who launched us: torchrun, SLURM, MPI, a Kubeflow PyTorchJob, trainkit's own launcher or nobody.
First match wins; what a kind can do is a capability, never read from its name."""

from __future__ import annotations

import ast
import os
from pathlib import Path

import pytest

from trainkit.distributed.env import detect_environment
from trainkit.distributed.launchers.reexec import build_rank_command
from trainkit.distributed.rank_env import World, threads_per_rank
from trainkit.errors import ConfigError
from trainkit.strategies.parallel import resolve_backend


def test_no_variables_means_a_lone_process():
    env = detect_environment({})
    assert env.name == "none" and not env.creates_processes_externally and env.world_size == 1


def test_torchrun_wins_over_everything():
    env = detect_environment(
        {
            "TORCHELASTIC_RUN_ID": "x",
            "WORLD_SIZE": "4",
            "RANK": "3",
            "LOCAL_RANK": "1",
            "GROUP_RANK": "1",
            "LOCAL_WORLD_SIZE": "2",
            "MASTER_ADDR": "10.1.1.1",
            "MASTER_PORT": "1234",
            "SLURM_NTASKS": "8",
            "SLURM_PROCID": "0",
        }
    )
    assert (env.name, env.world_size, env.global_rank, env.local_rank, env.node_rank) == (
        "torchrun",
        4,
        3,
        1,
        1,
    )
    assert (env.main_address, env.main_port) == ("10.1.1.1", 1234)


def test_slurm_job():
    env = detect_environment(
        {
            "SLURM_NTASKS": "8",
            "SLURM_PROCID": "5",
            "SLURM_LOCALID": "1",
            "SLURM_NODEID": "1",
            "SLURM_JOB_NUM_NODES": "2",
            "SLURM_NODELIST": "gpu[03-04]",
            "SLURM_JOB_ID": "4321",
            "SLURM_JOB_NAME": "train",
            "SLURM_STEP_ID": "0",
        }
    )
    assert (env.name, env.world_size, env.global_rank, env.local_rank, env.node_rank) == (
        "slurm",
        8,
        5,
        1,
        1,
    )
    assert (
        env.local_world_size == 4 and env.main_address == "gpu03" and env.main_port == 31544
    )  # 15000 + (job 4321 * 64 + step 0) % 20000: a port per job step


def test_interactive_slurm_shell_is_not_a_job():
    env = detect_environment({"SLURM_NTASKS": "1", "SLURM_PROCID": "0", "SLURM_JOB_NAME": "bash"})
    assert env.name == "none"


def test_open_mpi():
    env = detect_environment(
        {
            "OMPI_COMM_WORLD_SIZE": "4",
            "OMPI_COMM_WORLD_RANK": "2",
            "OMPI_COMM_WORLD_LOCAL_RANK": "0",
            "OMPI_COMM_WORLD_LOCAL_SIZE": "2",
            "MASTER_ADDR": "head",
        }
    )
    assert (env.name, env.world_size, env.global_rank, env.local_rank, env.node_rank) == (
        "mpi",
        4,
        2,
        0,
        1,
    )
    assert env.main_address == "head"


def horovodrun_rank(rank: int, local_rank: int, cross_rank: int, **extra: str) -> dict[str, str]:
    """The variables ``horovodrun --gloo -np 4 -H a:2,b:2`` gives one rank."""
    return {
        "HOROVOD_HOSTNAME": "b" if cross_rank else "a",
        "HOROVOD_RANK": str(rank),
        "HOROVOD_SIZE": "4",
        "HOROVOD_LOCAL_RANK": str(local_rank),
        "HOROVOD_LOCAL_SIZE": "2",
        "HOROVOD_CROSS_RANK": str(cross_rank),
        "HOROVOD_CROSS_SIZE": "2",
        "HOROVOD_GLOO_RENDEZVOUS_ADDR": "10.0.0.5",
        "HOROVOD_GLOO_RENDEZVOUS_PORT": "41234",
        "HOROVOD_CONTROLLER": "gloo",
        **extra,
    }


def test_horovodrun_ranks_come_from_its_variables_and_its_node_from_the_cross_rank():
    env = detect_environment(horovodrun_rank(3, 1, 1))
    assert (env.name, env.world_size, env.global_rank, env.local_rank, env.node_rank) == (
        "horovod",
        4,
        3,
        1,
        1,
    )
    assert (env.local_world_size, env.num_nodes, env.creates_processes_externally) == (2, 2, True)


def test_horovodrun_on_several_hosts_meets_at_its_own_host_unless_master_addr_says():
    """horovodrun's rendezvous address is the host it runs on: rank 0's, the first of -H."""
    assert detect_environment(horovodrun_rank(0, 0, 0)).main_address == "10.0.0.5"
    moved = horovodrun_rank(2, 0, 1, MASTER_ADDR="a")
    assert detect_environment(moved).main_address == "a"


def test_horovodrun_on_one_host_meets_on_loopback():
    one_host = horovodrun_rank(1, 1, 0, HOROVOD_SIZE="2", HOROVOD_CROSS_SIZE="1")
    env = detect_environment(one_host)
    assert (env.num_nodes, env.main_address) == (1, "127.0.0.1")


def test_horovodrun_port_is_derived_from_its_rendezvous_one_per_run():
    first = detect_environment(horovodrun_rank(0, 0, 0))
    again = detect_environment(horovodrun_rank(3, 1, 1))
    other_run = detect_environment(horovodrun_rank(0, 0, 0, HOROVOD_GLOO_RENDEZVOUS_PORT="41235"))
    assert first.main_port == again.main_port != other_run.main_port
    assert 15000 <= first.main_port < 35000 and not first.port_fixed
    assert first.rendezvous_id == "horovodrun 10.0.0.5:41234" != other_run.rendezvous_id
    fixed = detect_environment(horovodrun_rank(0, 0, 0, MASTER_PORT="29555"))
    assert (fixed.main_port, fixed.port_fixed) == (29555, True)


def test_horovodrun_wins_over_the_mpirun_it_may_run_under():
    both = horovodrun_rank(1, 1, 0, OMPI_COMM_WORLD_SIZE="4", OMPI_COMM_WORLD_RANK="1")
    assert detect_environment(both).name == "horovod"


def test_horovodrun_in_its_mpi_mode_is_mpirun():
    """``horovodrun`` with MPI runs mpirun: its ranks carry OpenMPI's variables only."""
    env = detect_environment(
        {
            "OMPI_COMM_WORLD_SIZE": "2",
            "OMPI_COMM_WORLD_RANK": "1",
            "OMPI_COMM_WORLD_LOCAL_RANK": "1",
            "OMPI_COMM_WORLD_LOCAL_SIZE": "2",
            "OMPI_COMMAND": "python",
        }
    )
    assert (env.name, env.global_rank, env.local_world_size) == ("mpi", 1, 2)


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"HOROVOD_RANK": "4"}, "RANK '4'; expected a rank below WORLD_SIZE=4"),
        ({"HOROVOD_LOCAL_SIZE": "0"}, "HOROVOD_LOCAL_SIZE '0'; expected an integer >= 1"),
        ({"HOROVOD_SIZE": "four"}, "HOROVOD_SIZE 'four'; expected an integer >= 1"),
    ],
)
def test_horovodrun_variables_that_disagree_are_one_line(change, named):
    with pytest.raises(ConfigError, match=named) as info:
        detect_environment(horovodrun_rank(0, 0, 0, **change))
    assert "horovodrun" in str(info.value) or "HOROVOD_" in str(info.value)


def test_trainkit_child():
    """A rank of trainkit's launcher is recognised by the mark the launcher sets."""
    env = detect_environment(
        {
            "TRAINKIT_LAUNCHED": "1",
            "LOCAL_RANK": "1",
            "WORLD_SIZE": "2",
            "RANK": "1",
            "LOCAL_WORLD_SIZE": "2",
            "MASTER_PORT": "5555",
        }
    )
    assert (env.name, env.global_rank, env.main_port) == ("trainkit", 1, 5555)


def pytorchjob_pod(rank: int, **extra: str) -> dict[str, str]:
    """What the Kubeflow training operator gives the pod of ``rank`` in a PyTorchJob of two
    (Master + one Worker), with what Kubernetes gives every pod."""
    return {
        "KUBERNETES_PORT": "tcp://10.96.0.1:443",
        "KUBERNETES_SERVICE_HOST": "10.96.0.1",
        "MASTER_ADDR": "autoencoder-master-0",
        "MASTER_PORT": "23456",
        "WORLD_SIZE": "2",
        "RANK": str(rank),
        "PYTHONUNBUFFERED": "0",
        **extra,
    }


def test_a_pytorchjob_pod_is_one_rank_on_a_node_of_its_own():
    """As Lightning's KubeflowEnvironment: the operator started the process (trainkit starts
    none), a rank per pod, the pod is the node."""
    env = detect_environment(pytorchjob_pod(1))
    assert (env.name, env.world_size, env.global_rank, env.local_rank, env.node_rank) == (
        "kubeflow",
        2,
        1,
        0,
        1,
    )
    assert (env.local_world_size, env.num_nodes, env.creates_processes_externally) == (1, 2, True)
    assert (env.main_address, env.main_port, env.rendezvous_id) == (
        "autoencoder-master-0",
        23456,
        "",
    )  # torch's env:// at the Master pod's service


def test_a_pod_needs_every_variable_of_the_operator():
    """Without Kubernetes, or without one of the operator's variables, the rank variables have
    no launcher behind them: refused, as before."""
    for missing in ("KUBERNETES_PORT", "MASTER_ADDR", "MASTER_PORT"):
        pod = pytorchjob_pod(1)
        del pod[missing]
        with pytest.raises(ConfigError, match=r"rank variables .*none started this process"):
            detect_environment(pod)
    with pytest.raises(ConfigError, match=r"RANK '2'; expected a rank below WORLD_SIZE=2"):
        detect_environment(pytorchjob_pod(2))
    with pytest.raises(ConfigError, match=r"MASTER_PORT 'http'; expected a port number"):
        detect_environment(pytorchjob_pod(0, MASTER_PORT="http"))


def test_launchers_inside_a_pod_win_over_the_pod():
    """torchrun as the pod's command (Kubeflow's elastic PyTorchJob), or trainkit's own ranks:
    their variables describe the rank, not the operator's."""
    torchrun = pytorchjob_pod(
        0, TORCHELASTIC_RUN_ID="j", WORLD_SIZE="4", LOCAL_WORLD_SIZE="2", RANK="1", LOCAL_RANK="1"
    )
    assert detect_environment(torchrun).name == "torchrun"
    own = pytorchjob_pod(0, TRAINKIT_LAUNCHED="1")
    assert detect_environment(own).name == "trainkit"


def test_the_registry_holds_every_kind_in_the_order_of_detection():
    from trainkit.distributed import environments

    kinds = [kind.name for kind in environments.ENVIRONMENTS]
    assert kinds == ["trainkit", "torchrun", "horovod", "mpi", "slurm", "mpi", "kubeflow", "none"]
    assert environments.LoneEnvironment.detect({}) == environments.LoneEnvironment()


def test_the_world_of_a_pytorchjob_is_checked_like_other_launchers():
    """trainer.devices 1 and num_nodes = the pods; anything else is one line before training."""
    from trainkit.devices import DeviceSelection
    from trainkit.strategies import Placement, select_strategy

    pod = detect_environment(pytorchjob_pod(0))
    one, two = DeviceSelection("cpu", (0,)), DeviceSelection("cpu", (0, 1))
    strategy = select_strategy("auto", Placement(one, 2, pod))
    assert (strategy.name, strategy.world_size, strategy.global_rank) == ("ddp", 2, 0)
    assert strategy.launcher(max_restarts=0) is None  # the operator started every rank
    with pytest.raises(
        ConfigError, match=r"trainer\.num_nodes 1; expected 2, the nodes the PyTorchJob runs on"
    ):
        select_strategy("ddp", Placement(one, 1, pod))
    with pytest.raises(ConfigError, match=r"trainer\.devices 2; expected 1, .*torchrun --nproc"):
        select_strategy("ddp", Placement(two, 2, pod))


def names_read_to_decide(path: Path) -> list[str]:
    """``<something>.name`` compared with ``==``, ``!=``, ``in`` where the something is a
    cluster environment (named ``cluster``, ``env``, ``environment``...), or a literal kind
    name compared with anything, in ``path`` ("none" and "mpi" name other settings too: they
    count on a ``.name``)."""
    kinds = {"slurm", "slurm-node", "torchrun", "kubeflow"}
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Compare):
            continue
        for side in (node.left, *node.comparators):
            named = isinstance(side, ast.Attribute) and side.attr == "name"
            owner = ast.unparse(side.value) if isinstance(side, ast.Attribute) else ""
            if named and any(word in owner for word in ("cluster", "env")):
                found.append(f"{path}:{node.lineno}: {ast.unparse(node)}")
            if isinstance(side, ast.Constant) and side.value in kinds:
                found.append(f"{path}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_decision_reads_the_name_of_a_cluster_kind():
    """What a kind can do is a capability (creates_processes_externally, launcher_words,
    joins_horovod...); its name is for messages."""
    package = Path(__file__).resolve().parents[3] / "trainkit"
    found = [hit for path in sorted(package.rglob("*.py")) for hit in names_read_to_decide(path)]
    assert found == []


def test_build_rank_command_sets_every_variable_for_each_rank():
    world = World(local_world_size=2, num_nodes=2, node_rank=1, main_address="head", main_port=6000)
    argv, env = build_rank_command(
        1, world, ["python", "-m", "trainkit", "fit"], {"PATH": "/bin"}, "/tmp/err"
    )
    assert argv == ["python", "-m", "trainkit", "fit"]
    assert {
        k: env[k]
        for k in (
            "MASTER_ADDR",
            "MASTER_PORT",
            "WORLD_SIZE",
            "NODE_RANK",
            "LOCAL_RANK",
            "RANK",
            "LOCAL_WORLD_SIZE",
        )
    } == {
        "MASTER_ADDR": "head",
        "MASTER_PORT": "6000",
        "WORLD_SIZE": "4",
        "NODE_RANK": "1",
        "LOCAL_RANK": "1",
        "RANK": "3",
        "LOCAL_WORLD_SIZE": "2",
    }
    assert env["PATH"] == "/bin" and env["TRAINKIT_ERROR_FILE"] == "/tmp/err/rank1.json"


def test_each_rank_takes_its_share_of_the_cpus_unless_the_user_chose(monkeypatch):
    """As torchrun and Lightning's launchers: the node's CPUs (this process's affinity) divided
    among its ranks, at least one thread each; an OMP_NUM_THREADS the user set stands."""
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(8)))
    assert [threads_per_rank(n) for n in (1, 2, 3, 8, 16)] == [8, 4, 2, 1, 1]
    world = World(local_world_size=2)
    _, env = build_rank_command(0, world, ["python"], {"PATH": "/bin"})
    assert env["OMP_NUM_THREADS"] == "4"
    _, env = build_rank_command(0, world, ["python"], {"OMP_NUM_THREADS": "3"})
    assert env["OMP_NUM_THREADS"] == "3"


def test_backend_defaults_and_override(monkeypatch):
    monkeypatch.delenv("TRAINKIT_DISTRIBUTED_BACKEND", raising=False)
    assert resolve_backend("cpu") == "gloo" and resolve_backend("gpu") == "nccl"
    monkeypatch.setenv("TRAINKIT_DISTRIBUTED_BACKEND", "gloo")
    assert resolve_backend("gpu") == "gloo"
    monkeypatch.setenv("TRAINKIT_DISTRIBUTED_BACKEND", "smoke-signals")
    with pytest.raises(ConfigError, match="TRAINKIT_DISTRIBUTED_BACKEND 'smoke-signals'"):
        resolve_backend("cpu")


def test_only_the_requeue_signal_requeues_a_slurm_job(monkeypatch, capsys):
    """scancel (SIGTERM) cancels; sbatch --signal=USR1@N's SIGUSR1 requeues (checked with a real
    SLURM in tests/integration/clusters/test_slurm_preemption.py); the signal is a setting."""
    from trainkit.distributed import slurm

    monkeypatch.setenv("SLURM_JOB_ID", "42")
    monkeypatch.delenv("TRAINKIT_REQUEUE_SIGNAL", raising=False)
    monkeypatch.setattr(slurm, "job_can_requeue", lambda job: (False, "asked"))
    monkeypatch.setattr(slurm, "requeued_by_slurm", lambda job: False)  # SLURM not asked here
    slurm.requeue_after_preemption(True, "SIGTERM")
    said = capsys.readouterr().err
    assert "stopped by SIGTERM; not requeueing SLURM job 42: only SIGUSR1 requeues it" in said
    slurm.requeue_after_preemption(True, "SIGUSR1")  # goes on to ask SLURM
    assert "not requeueing SLURM job 42: asked" in capsys.readouterr().err
    monkeypatch.setenv("TRAINKIT_REQUEUE_SIGNAL", "term")
    slurm.requeue_after_preemption(True, "SIGTERM")
    assert "not requeueing SLURM job 42: asked" in capsys.readouterr().err
    monkeypatch.setenv("TRAINKIT_REQUEUE_SIGNAL", "HUP")
    with pytest.raises(ConfigError, match="TRAINKIT_REQUEUE_SIGNAL 'HUP'; expected USR1"):
        slurm.requeue_signal()


def test_a_killed_launchers_scratch_folder_is_swept_by_the_next(tmp_path):
    """A SIGKILLed launcher cannot remove its trainkit-errors-* folder; the next launcher removes
    the folders whose owner process is gone, and no other."""
    from tests.helpers.gone_pid import pid_of_no_process
    from trainkit.distributed.scratch import sweep_orphans

    gone = pid_of_no_process()
    orphan = tmp_path / f"trainkit-errors-{gone}-abcd"
    alive = tmp_path / f"trainkit-errors-{os.getpid()}-efgh"
    other = tmp_path / f"trainkit-spawn-{gone}-ijkl"  # another kind: swept by its own launcher
    for folder in (orphan, alive, other):
        (folder / "rank_board").mkdir(parents=True)
    assert sweep_orphans("errors", str(tmp_path)) == [orphan]
    assert not orphan.exists() and alive.exists() and other.exists()
