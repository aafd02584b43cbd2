"""ddp and ddp_spawn with real ranks on gloo: results, samplers, sync_dist, teardown on failure."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from tests.helpers.command_env import REPO, cli_env, run_captured
from trainkit.distributed.ports import find_free_port
from trainkit.distributed.signals import PREEMPTED_EXIT_CODE

CONFIG = str(REPO / "configs" / "autoencoder.yaml")
PROBE = [
    "--model",
    "tests.helpers.probes.RankProbe",
    "--data",
    "tests.helpers.probes.IndexedData",
    "--trainer.max_epochs",
    "2",
    "--trainer.num_sanity_val_steps",
    "0",
]


def finish(proc: subprocess.Popen, timeout: float = 120) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


def probes(root, world=2):
    return [torch.load(root / f"probe_rank{r}.pt", weights_only=False) for r in range(world)]


NO_SAMPLER = ["--trainer.use_distributed_sampler", "false", "--data.init_args.shuffle", "false"]
# the tests below read the two probe jobs that one fixture starts together: one worker runs them
pytestmark = pytest.mark.xdist_group("ddp_probes")


@pytest.fixture(scope="module")
def probe_jobs(tmp_path_factory):
    """Two 2-rank ddp jobs of the probe model started at the same moment, each choosing its own
    port: ``shards`` with the distributed sampler, ``no_sampler`` without it. Their folders and
    (exit code, stdout, stderr)."""
    folder = tmp_path_factory.mktemp("probe_jobs")
    extra = {"shards": [], "no_sampler": NO_SAMPLER}
    command = [sys.executable, "-m", "trainkit", "fit", "-c", CONFIG, *PROBE, "--trainer.devices"]
    jobs = {
        name: subprocess.Popen(
            [*command, "2", *args, "--trainer.default_root_dir", str(folder / name)],
            cwd=folder,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=cli_env(),
        )
        for name, args in extra.items()
    }
    try:
        return {name: (folder / name, finish(job, timeout=300)) for name, job in jobs.items()}
    finally:
        for job in jobs.values():
            if job.poll() is None:
                job.kill()
                job.wait()


def test_two_jobs_started_together_both_succeed(probe_jobs):
    for _, (code, _, err) in probe_jobs.values():
        assert code == 0, err


def assert_identical_replicas_on_disjoint_shards(root: Path, out: str) -> None:
    rank0, rank1 = probes(root)
    assert rank0["world_size"] == rank1["world_size"] == 2
    assert rank0["log_dir"] == rank1["log_dir"]
    for key, value in rank0["state_dict"].items():
        torch.testing.assert_close(rank1["state_dict"][key], value, rtol=0, atol=0)
    for epoch in (0, 1):
        a, b = rank0["seen"][f"train{epoch}"], rank1["seen"][f"train{epoch}"]
        assert not set(a) & set(b) and sorted(a + b) == list(range(64))
    assert rank0["seen"]["train0"] != rank0["seen"]["train1"]  # set_epoch reshuffles
    assert rank0["seen"]["val0"] == list(range(0, 16, 2))  # validation is not shuffled
    assert out.count("epoch 0:") == 1  # progress only on rank 0
    assert (root / "trainkit_logs" / "version_0" / "checkpoints" / "last.ckpt").is_file()


def test_two_ranks_train_identical_replicas_on_disjoint_shards(probe_jobs):
    root, (code, out, err) = probe_jobs["shards"]
    assert code == 0, err
    assert_identical_replicas_on_disjoint_shards(root, out)


@pytest.mark.timeout(120)
def test_ddp_spawn_trains_identical_replicas_on_disjoint_shards(start_cli, tmp_path):
    code, out, err = finish(
        start_cli(
            "fit", "-c", CONFIG, *PROBE, "--trainer.devices", "2", "--trainer.strategy", "ddp_spawn"
        )
    )
    assert code == 0, err
    assert_identical_replicas_on_disjoint_shards(tmp_path, out)
    assert [probe["threads"] for probe in probes(tmp_path)] == [threads_share(2)] * 2


def test_sync_dist_reduces_across_ranks_and_unsynced_logs_rank_zero(probe_jobs):
    root, (code, _, err) = probe_jobs["shards"]
    assert code == 0, err
    metrics = probes(root)[0]["metrics"]
    assert (
        metrics["rank_mean"],
        metrics["rank_sum"],
        metrics["rank_max"],
        metrics["rank_min"],
    ) == (1.5, 3.0, 2.0, 1.0)
    assert metrics["rank_unsynced"] == 1.0
    # training logs on_step and on_epoch: each step's value is synced for the step; the epoch
    # is reduced over the ranks once, from each rank's own values
    batches = -(-len(probes(root)[0]["seen"]["train1"]) // 64)  # the config's batch_size: 64
    assert (metrics["train_rank_mean_step"], metrics["train_rank_sum_step"]) == (1.5, 3.0)
    assert (metrics["train_rank_mean_epoch"], metrics["train_rank_sum_epoch"]) == (
        1.5,
        batches * 3.0,
    )


def test_the_launcher_shares_the_cpus_among_the_ranks(probe_jobs):
    root, (code, _, err) = probe_jobs["shards"]
    assert code == 0, err
    assert [probe["threads"] for probe in probes(root)] == [threads_share(2)] * 2


def threads_share(ranks: int) -> int:
    """Each rank's intra-op threads: OMP_NUM_THREADS if the user set it, else its CPU share."""
    chosen = os.environ.get("OMP_NUM_THREADS")
    return int(chosen) if chosen else max(1, len(os.sched_getaffinity(0)) // ranks)


def test_use_distributed_sampler_false_gives_every_rank_all_data(probe_jobs):
    root, (code, _, err) = probe_jobs["no_sampler"]
    assert code == 0, err
    rank0, rank1 = probes(root)
    assert rank0["seen"]["train0"] == rank1["seen"]["train0"] == list(range(64))


@pytest.mark.timeout(180)
def test_sigterm_to_the_launcher_stops_every_rank(start_cli, tmp_path):
    marker = tmp_path / "rank1-hangs"
    proc = start_cli(
        "fit",
        "-c",
        CONFIG,
        "--model",
        "tests.helpers.models.Failing",
        "--model.init_args.how",
        "hang",
        "--model.init_args.fail_step",
        "2",
        "--model.init_args.marker",
        str(marker),
        "--trainer.devices",
        "2",
        env=cli_env(TRAINKIT_STOP_GRACE="1"),  # a hung rank cannot stop gracefully
    )
    deadline = time.monotonic() + 240  # start-up on a busy machine
    while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert marker.exists(), "rank 1 never reached its hang"
    proc.send_signal(signal.SIGTERM)  # how soon it stops: scripts/bench_reliability.py
    returncode, _, err = finish(proc, timeout=60)
    assert returncode == 128 + signal.SIGTERM and "1 s after SIGTERM" in err


@pytest.mark.timeout(150)
def test_torchrun_and_the_trainkit_launcher_give_the_same_weights(
    probe_jobs, tmp_path, no_leftovers
):
    own_root, (code, _, err) = probe_jobs["shards"]
    assert code == 0, err
    torchrun = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc-per-node",
            "2",  # torchrun's 2 processes per node must be asked for, as devices: 2 is
            "--master-port",
            str(find_free_port()),
            "-m",
            "trainkit",
            "fit",
            "-c",
            CONFIG,
            *PROBE,
            "--trainer.devices",
            "2",
            "--trainer.default_root_dir",
            str(tmp_path),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=280,
        env=cli_env(TMPDIR=str(tmp_path)),  # torchrun's own temp folder in the test's
    )
    assert torchrun.returncode == 0, torchrun.stderr
    for rank, (own, other) in enumerate(zip(probes(own_root), probes(tmp_path))):
        assert own["seen"] == other["seen"], f"rank {rank} saw other samples under torchrun"
        for key, value in own["state_dict"].items():
            torch.testing.assert_close(other["state_dict"][key], value, rtol=0, atol=0)


SCRIPT = """
import sys
import torch
from trainkit import Trainer, seed_everything
from trainkit.demos.autoencoder import AutoEncoder, SyntheticDataModule

if __name__ == "__main__":
    seed_everything(1)
    model, data = AutoEncoder(), SyntheticDataModule(num_samples=512)
    trainer = Trainer(accelerator="cpu", devices=2, strategy=sys.argv[1], max_epochs=2,
                      default_root_dir=sys.argv[2], enable_progress_bar=False)
    trainer.fit(model, datamodule=data)
    result = trainer.test(model, datamodule=data, verbose=False)
    print(f"RESULT rank={trainer.global_rank} test_loss={result[0]['test_loss']:.6f} "
          f"best={bool(trainer.checkpoint_callback.best_model_path)} step={trainer.global_step} "
          f"state={trainer.state.fn}/{trainer.state.status}", flush=True)
"""


@pytest.mark.timeout(150)
@pytest.mark.parametrize("strategy", ["ddp", "ddp_spawn"])
def test_a_script_can_fit_then_test(tmp_path, no_leftovers, strategy):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(SCRIPT))
    result = run_captured(
        [sys.executable, str(script), strategy, str(tmp_path)],
        timeout=280,
        env=cli_env(),
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    lines = [line for line in result.stdout.splitlines() if line.startswith("RESULT")]
    if strategy == "ddp":  # every rank runs the whole script
        assert sorted(line.split()[1] for line in lines) == ["rank=0", "rank=1"]
    else:  # ranks are spawned for each stage; the script itself continues in the parent with rank 0's results
        assert len(lines) == 1 and "best=True" in lines[0] and "step=8" in lines[0]
    losses = {line.split()[2] for line in lines}
    assert len(losses) == 1
    assert all(line.endswith("state=test/finished") for line in lines)  # also after spawned ranks


class Holder:
    pass


def test_ddp_spawn_names_the_attribute_that_cannot_be_pickled(tmp_path):
    from trainkit import Trainer
    from trainkit.demos.autoencoder import AutoEncoder
    from trainkit.errors import MisconfigurationError

    model = AutoEncoder()
    model.data = Holder()
    with open(os.devnull) as stream:
        model.data.stream = stream
        trainer = Trainer(
            accelerator="cpu", devices=2, strategy="ddp_spawn", default_root_dir=str(tmp_path)
        )
        with pytest.raises(
            MisconfigurationError,
            match=r"model\.data\.stream: _io\.TextIOWrapper.*use strategy: ddp",
        ):
            trainer.fit(model, train_dataloaders=[])


@pytest.mark.timeout(120)
def test_two_nodes_each_with_its_own_launcher(start_cli, tmp_path):
    port = str(find_free_port())
    nodes = [
        start_cli(
            "fit",
            "-c",
            CONFIG,
            *PROBE,
            "--trainer.devices",
            "1",
            "--trainer.num_nodes",
            "2",
            env=cli_env(NODE_RANK=str(node), MASTER_ADDR="127.0.0.1", MASTER_PORT=port),
        )
        for node in (0, 1)
    ]
    results = [finish(node) for node in nodes]
    assert [code for code, _, _ in results] == [0, 0], [err for _, _, err in results]
    rank0, rank1 = probes(tmp_path)
    assert rank0["world_size"] == 2
    assert sorted(rank0["seen"]["train0"] + rank1["seen"]["train0"]) == list(range(64))


@pytest.mark.timeout(240)
def test_ddp_spawn_brings_back_a_model_of_several_mib(start_cli, tmp_path):
    """Rank 0's result used to travel through a pipe that held ~64 KiB: a bigger model
    deadlocked the parent, rank 0 and rank 1 forever. It now travels through a file."""
    proc = start_cli(
        "fit",
        "-c",
        CONFIG,
        "--trainer.devices",
        "2",
        "--trainer.strategy",
        "ddp_spawn",
        "--model.init_args.hidden",
        "16384",
        "--trainer.max_epochs",
        "1",
        "--trainer.limit_train_batches",
        "2",
        "--trainer.limit_val_batches",
        "1",
        "--data.init_args.num_samples",
        "512",
    )
    returncode, out, err = finish(proc, timeout=440)
    assert returncode == 0, err
    (last,) = tmp_path.glob("**/checkpoints/last.ckpt")
    weights = torch.load(last, weights_only=True)["state_dict"]
    assert sum(t.numel() * t.element_size() for t in weights.values()) > 4 * 2**20
    assert "fit done in" in out


@pytest.mark.timeout(180)
def test_sigterm_during_start_up_stops_every_rank_gracefully_and_blames_none(start_cli, tmp_path):
    """The ranks hold a stop signal from their first instruction: start-up goes on to the first
    safe point in fit, where every rank saves and stops (exit 75) instead of dying."""
    marker = tmp_path / "starting-rank"
    proc = start_cli(
        "fit",
        "-c",
        CONFIG,
        "--model",
        "tests.helpers.models.SlowStart",
        "--model.init_args.marker",
        str(marker),
        "--model.init_args.linger_s",
        "2",
        "--trainer.devices",
        "2",
    )
    deadline = time.monotonic() + 240
    ready = [Path(f"{marker}{rank}") for rank in range(2)]
    while not all(p.exists() for p in ready) and proc.poll() is None:
        assert time.monotonic() < deadline, "the ranks never started"
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    returncode, _, err = finish(proc, timeout=120)
    assert returncode == PREEMPTED_EXIT_CODE, err
    assert "preempted (SIGTERM)" in err
    assert "was killed by" not in err and "[rank" not in err
