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

from tests.conftest import REPO, cli_env
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


@pytest.mark.timeout(120)
@pytest.mark.parametrize("strategy", ["ddp", "ddp_spawn"])
def test_two_ranks_train_identical_replicas_on_disjoint_shards(start_cli, tmp_path, strategy):
    code, out, err = finish(
        start_cli(
            "fit", "-c", CONFIG, *PROBE, "--trainer.devices", "2", "--trainer.strategy", strategy
        )
    )
    assert code == 0, err
    rank0, rank1 = probes(tmp_path)
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
    assert (tmp_path / "trainkit_logs" / "version_0" / "checkpoints" / "last.ckpt").is_file()


@pytest.mark.timeout(120)
def test_sync_dist_reduces_across_ranks_and_unsynced_logs_rank_zero(start_cli, tmp_path):
    code, _, err = finish(start_cli("fit", "-c", CONFIG, *PROBE, "--trainer.devices", "2"))
    assert code == 0, err
    metrics = probes(tmp_path)[0]["metrics"]
    assert (
        metrics["rank_mean"],
        metrics["rank_sum"],
        metrics["rank_max"],
        metrics["rank_min"],
    ) == (1.5, 3.0, 2.0, 1.0)
    assert metrics["rank_unsynced"] == 1.0


@pytest.mark.timeout(120)
def test_use_distributed_sampler_false_gives_every_rank_all_data(start_cli, tmp_path):
    code, _, err = finish(
        start_cli(
            "fit",
            "-c",
            CONFIG,
            *PROBE,
            "--trainer.devices",
            "2",
            "--trainer.use_distributed_sampler",
            "false",
            "--data.init_args.shuffle",
            "false",
        )
    )
    assert code == 0, err
    rank0, rank1 = probes(tmp_path)
    assert rank0["seen"]["train0"] == rank1["seen"]["train0"] == list(range(64))


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("how", "rank", "code", "message"),
    [
        ("raise", 1, 1, "rank 1 failed with exit code 1"),
        ("kill", 0, 137, "rank 0 was killed by SIGKILL"),
    ],
)
def test_a_failing_rank_takes_the_job_down_fast(start_cli, how, rank, code, message):
    proc = start_cli(
        "fit",
        "-c",
        CONFIG,
        "--model",
        "tests.helpers.models.Failing",
        "--model.init_args.how",
        how,
        "--model.init_args.fail_rank",
        str(rank),
        "--trainer.devices",
        "2",
        "--trainer.max_epochs",
        "3",
    )
    returncode, _, err = finish(proc, timeout=60)
    assert returncode == code
    assert message in err
    if how == "raise":
        assert err.count("Traceback (most recent call last)") == 1
        assert "[rank 1] ValueError: boom on purpose" in err


@pytest.mark.timeout(60)
def test_failure_while_others_block_in_a_collective_ends_within_5_seconds(start_cli):
    proc = start_cli(
        "fit",
        "-c",
        CONFIG,
        "--model",
        "tests.helpers.models.Failing",
        "--model.init_args.how",
        "kill",
        "--model.init_args.fail_rank",
        "0",
        "--model.init_args.fail_step",
        "5",
        "--trainer.devices",
        "2",
        "--trainer.max_epochs",
        "3",
    )
    started = time.monotonic()
    returncode, _, err = finish(proc, timeout=60)
    assert returncode != 0 and "killed by SIGKILL" in err
    assert time.monotonic() - started < 30


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
    deadline = time.monotonic() + 120  # start-up on a busy machine
    while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.1)
    assert marker.exists(), "rank 1 never reached its hang"
    proc.send_signal(signal.SIGTERM)
    stopped = time.monotonic()
    returncode, _, err = finish(proc, timeout=30)
    assert time.monotonic() - stopped < 10
    assert returncode == 128 + signal.SIGTERM and "1 s after SIGTERM" in err


@pytest.mark.timeout(150)
def test_two_jobs_started_together_both_succeed(start_cli, tmp_path):
    jobs = [
        start_cli(
            "fit",
            "-c",
            CONFIG,
            "--trainer.devices",
            "2",
            "--trainer.max_epochs",
            "1",
            "--data.init_args.num_samples",
            "512",
            root=tmp_path / f"job{i}",
        )
        for i in range(2)
    ]
    results = [finish(job, timeout=140) for job in jobs]
    assert [code for code, _, _ in results] == [0, 0], [err for _, _, err in results]


@pytest.mark.timeout(150)
def test_torchrun_and_the_trainkit_launcher_give_the_same_weights(
    start_cli, tmp_path, no_leftovers
):
    args = ["-c", CONFIG, "--trainer.max_epochs", "2", "--data.init_args.num_samples", "512"]
    args += ["--trainer.devices", "2"]  # torchrun's 2 processes per node must be asked for
    code, _, err = finish(start_cli("fit", *args, root=tmp_path / "own"))
    assert code == 0, err
    torchrun = subprocess.run(
        [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc-per-node",
            "2",
            "--master-port",
            str(find_free_port()),
            "-m",
            "trainkit",
            "fit",
            *args,
            "--trainer.default_root_dir",
            str(tmp_path / "torchrun"),
        ],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=140,
        env=cli_env(),
    )
    assert torchrun.returncode == 0, torchrun.stderr
    own = torch.load(next((tmp_path / "own").glob("**/last.ckpt")), weights_only=True)["state_dict"]
    other = torch.load(next((tmp_path / "torchrun").glob("**/last.ckpt")), weights_only=True)[
        "state_dict"
    ]
    for key, value in own.items():
        torch.testing.assert_close(other[key], value)


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
          f"best={bool(trainer.checkpoint_callback.best_model_path)} step={trainer.global_step}", flush=True)
"""


@pytest.mark.timeout(150)
@pytest.mark.parametrize("strategy", ["ddp", "ddp_spawn"])
def test_a_script_can_fit_then_test(tmp_path, no_leftovers, strategy):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(SCRIPT))
    result = subprocess.run(
        [sys.executable, str(script), strategy, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=140,
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
    returncode, out, err = finish(proc, timeout=220)
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
    deadline = time.monotonic() + 120
    ready = [Path(f"{marker}{rank}") for rank in range(2)]
    while not all(p.exists() for p in ready) and proc.poll() is None:
        assert time.monotonic() < deadline, "the ranks never started"
        time.sleep(0.1)
    proc.send_signal(signal.SIGTERM)
    returncode, _, err = finish(proc, timeout=60)
    assert returncode == PREEMPTED_EXIT_CODE, err
    assert "preempted (SIGTERM)" in err
    assert "was killed by" not in err and "[rank" not in err
