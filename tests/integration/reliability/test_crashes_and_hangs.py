"""A rank that crashes ends the whole job; a rank that stops arriving ends it after the collective
timeout, naming the late rank; neither leaves a process behind. How soon (within 5 s, within the
timeout + 5 s) is measured by scripts/bench_reliability.py."""

from __future__ import annotations

import signal
import time

import pytest

from tests.helpers.command_env import cli_env
from tests.integration.reliability.runs import write_config
from trainkit.distributed.ports import find_free_port

pytestmark = pytest.mark.timeout(120)

FAULT_EXIT_CODES = {"raise": 1, "exit": 3, "kill": 128 + signal.SIGKILL}


def run_with_fault(tmp_path, run_main, fault, rank, env=None, **trainer):
    """Two ranks, ``fault`` injected in ``rank`` at step 2; the launcher runs in this process
    (what it says and returns is the subject, not its process). Returns the exit code, the
    seconds from the fault to the job's end, and stderr."""
    fault_file = tmp_path / "fault_time"
    config = write_config(
        tmp_path, devices=2, fault=fault, fault_rank=rank, fault_step=2, fault_file=str(fault_file)
    )
    overrides = [f"--trainer.{key}={value}" for key, value in trainer.items()]
    root = ["--trainer.default_root_dir", str(tmp_path)]
    # the ranks import the model from tests/: the repository on their PYTHONPATH
    done = run_main("fit", "-c", str(config), *overrides, *root, env=env or cli_env())
    ended = time.time()
    assert fault_file.exists(), done.stderr
    return done.returncode, ended - float(fault_file.read_text()), done.stderr


@pytest.mark.parametrize(
    ("fault", "rank"),
    # the store's host (rank 0) and a plain rank each die abruptly; the exit paths that leave a
    # traceback or only a code are each shown from one side (any rank runs the same code)
    [("kill", 0), ("kill", 1), ("raise", 1), ("exit", 0)],
)
def test_a_crashed_rank_ends_the_job(tmp_path, run_main, no_leftovers, fault, rank):
    """The other rank is waiting in the gradient all-reduce when its peer dies."""
    code, _, stderr = run_with_fault(tmp_path, run_main, fault, rank)
    assert code == FAULT_EXIT_CODES[fault], stderr
    assert f"trainkit: rank {rank} " in stderr
    if fault == "kill":
        assert f"rank {rank} was killed by SIGKILL" in stderr, stderr
    if fault == "exit":
        assert f"rank {rank} failed with exit code 3" in stderr, stderr
    if fault == "raise":  # the failing rank's traceback, not its peer's follow-on errors
        assert f"[rank {rank}] RuntimeError: injected failure" in stderr
        assert stderr.count("Traceback (most recent call last)") == 1, stderr


def test_a_hung_rank_ends_the_job_after_the_timeout_naming_it(tmp_path, run_main, no_leftovers):
    code, seconds, stderr = run_with_fault(
        tmp_path, run_main, "hang", 1, env=cli_env(TRAINKIT_COLLECTIVE_TIMEOUT="4")
    )
    assert code != 0
    assert seconds >= 4.0, stderr
    assert "a collective timed out: late: rank 1 in training_step (epoch 0, batch 2" in stderr
    assert "waiting: rank 0 in backward (gradient all-reduce)" in stderr


def test_the_strategy_timeout_setting_bounds_a_hang(tmp_path, run_main, no_leftovers):
    code, seconds, stderr = run_with_fault(
        tmp_path,
        run_main,
        "hang",
        0,
        **{"strategy": "trainkit.strategies.DDPStrategy", "strategy.timeout": 3},
    )
    assert code != 0
    assert seconds >= 3.0, stderr
    assert "late: rank 0 in training_step" in stderr


def test_a_collective_only_one_rank_calls_ends_the_job(tmp_path, run_main, no_leftovers):
    code, _, stderr = run_with_fault(
        tmp_path, run_main, "extra_collective", 1, env=cli_env(TRAINKIT_COLLECTIVE_TIMEOUT="4")
    )
    assert code != 0
    assert "trainkit: rank " in stderr
    assert "rank 1 in training_step (epoch 0, batch 2" in stderr  # where it called it


def test_a_rank_stuck_in_its_data_loader_is_named(tmp_path, run_main, no_leftovers):
    config = write_config(tmp_path, devices=2, workers=1, data={"stall_rank": 1, "stall_after": 12})
    started = time.monotonic()
    # the ranks' data-loader workers die with the job and leave multiprocessing's temp folders
    env = cli_env(TRAINKIT_COLLECTIVE_TIMEOUT="4", TMPDIR=str(tmp_path))
    done = run_main("fit", "-c", str(config), "--trainer.default_root_dir", str(tmp_path), env=env)
    stderr = done.stderr
    assert done.returncode != 0
    assert time.monotonic() - started >= 4.0, stderr  # it waited out the 4 s timeout
    assert "late: rank 1 in loading the next batch (epoch 0, batch " in stderr


def test_on_two_nodes_the_late_rank_of_the_other_node_is_named_and_that_node_stopped(
    tmp_path, start_cli
):
    """Two nodes on one host (tests/integration/clusters/test_two_nodes.py runs them on two): node 0's rank
    times out while node 1's sleeps outside any collective. Node 0's launcher asks node 1's for
    its board, names the late rank and its node, and tells node 1 the job failed, which stops
    the sleeping rank there."""
    config = write_config(tmp_path, devices=1, fault="hang", fault_rank=1, fault_step=2)
    port = str(find_free_port())
    nodes = [
        start_cli(
            "fit",
            "-c",
            str(config),
            "--trainer.num_nodes",
            "2",
            env=cli_env(
                NODE_RANK=str(node),
                MASTER_ADDR="127.0.0.1",
                MASTER_PORT=port,
                TRAINKIT_COLLECTIVE_TIMEOUT="4",
            ),
        )
        for node in (0, 1)
    ]
    assert nodes[0].wait(timeout=180) != 0
    stderr = nodes[0].stderr.read()
    late = "a collective timed out: late: rank 1 in training_step (epoch 0, batch 2, for "
    assert late in stderr and "on node 1 (" in stderr, stderr
    assert "waiting: rank 0 in backward" in stderr
    assert nodes[1].wait(timeout=60) != 0
    assert "trainkit: the job failed on node 0 (" in nodes[1].stderr.read()
