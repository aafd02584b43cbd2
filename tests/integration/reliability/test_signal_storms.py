"""A scheduler that repeats its stop signal (SIGTERM every fraction of a second, to the launcher
or to every process of the job, or SLURM's SIGTERM after its SIGUSR1 when it ends a job it
requeues) cannot turn a stop whose checkpoint is saved into a kill: the job still ends in 75,
with no rank blamed (docs/reliability.md, "Preemption" 4)."""

from __future__ import annotations

import contextlib
import signal
import tempfile
import threading
import time
from pathlib import Path

import psutil
import pytest

from tests.integration.reliability.runs import checkpoints, write_config
from tests.integration.reliability.test_preemption import wait_for
from trainkit import PREEMPTED_EXIT_CODE

pytestmark = pytest.mark.timeout(180)

STORM_GAP_S = 0.1  # between two signals of the storm, from the save until the job has ended


class StderrLines:
    """The lines a running command writes to stderr, read as they come."""

    def __init__(self, proc) -> None:
        self.lines: list[str] = []
        self._thread = threading.Thread(target=self._read, args=(proc.stderr,), daemon=True)
        self._thread.start()

    def _read(self, stream) -> None:
        for line in stream:
            self.lines.append(line)

    def wait_for(self, text: str, proc, timeout: float = 120.0) -> None:
        deadline = time.monotonic() + timeout
        while not any(text in line for line in self.lines):
            assert proc.poll() is None, self.text()
            assert time.monotonic() < deadline, f"no {text!r} after {timeout} s:\n{self.text()}"
            time.sleep(0.02)

    def text(self) -> str:
        return "".join(self.lines)

    def finish(self) -> str:
        self._thread.join(timeout=60)
        return "".join(self.lines)


def wait_until_every_rank_saved(launcher, ranks: int, timeout: float = 120.0) -> None:
    """The launcher's own readiness marks: each rank creates ``rank<N>.saved`` in the launcher's
    scratch folder (TRAINKIT_SAVED_FILE) once its stop's checkpoint is saved."""
    pattern = f"trainkit-errors-{launcher.pid}-*/rank*.saved"
    deadline = time.monotonic() + timeout
    while len(list(Path(tempfile.gettempdir()).glob(pattern))) < ranks:
        assert launcher.poll() is None, "the job ended before every rank saved"
        assert time.monotonic() < deadline, f"not every rank saved after {timeout} s"
        time.sleep(0.02)


def storm(targets: list[psutil.Process], signum: int, run) -> int:
    """Send ``signum`` to each target every STORM_GAP_S until ``run`` has ended; returns how many
    rounds were sent."""
    rounds = 0
    deadline = time.monotonic() + 120
    while run.poll() is None:
        assert time.monotonic() < deadline, "the job did not end under the storm"
        for target in targets:
            with contextlib.suppress(psutil.NoSuchProcess):  # psutil refuses a reused pid
                target.send_signal(signum)
        rounds += 1
        time.sleep(STORM_GAP_S)
    return rounds


def start_training(tmp_path, start_cli, devices: int):
    started = tmp_path / "started"
    config = write_config(tmp_path, devices, sleep_s=0.15, touch_file=str(started))
    run = start_cli("fit", "-c", str(config), root=tmp_path / "run")
    stderr = StderrLines(run)
    wait_for(started, run)
    return run, stderr


def processes(run) -> list[psutil.Process]:
    launcher = psutil.Process(run.pid)
    return [launcher, *launcher.children()]


@pytest.mark.parametrize("to", ["launcher", "every process"])
def test_a_sigterm_storm_after_every_rank_saved_still_ends_in_75(tmp_path, start_cli, to):
    run, stderr = start_training(tmp_path, start_cli, devices=2)
    targets = processes(run) if to == "every process" else [psutil.Process(run.pid)]
    for target in targets:
        target.send_signal(signal.SIGTERM)  # the stop
    wait_until_every_rank_saved(run, ranks=2)
    rounds = storm(targets, signal.SIGTERM, run)
    output = stderr.finish()
    assert run.returncode == PREEMPTED_EXIT_CODE, f"after {rounds} rounds:\n{output}"
    assert "preempted (SIGTERM): every rank saved its state" in output, output
    assert "Traceback" not in output and "killed" not in output, output
    assert output.count("finishing the exit (75)") <= 1, output  # the launcher says it once
    assert "last.ckpt" in checkpoints(tmp_path / "run")


def test_a_sigterm_storm_after_a_single_process_saved_still_ends_in_75(tmp_path, start_cli):
    run, stderr = start_training(tmp_path, start_cli, devices=1)
    run.send_signal(signal.SIGTERM)
    stderr.wait_for("trainkit: preempted (SIGTERM) at epoch", run)  # said once it is saved
    rounds = storm([psutil.Process(run.pid)], signal.SIGTERM, run)
    output = stderr.finish()
    assert run.returncode == PREEMPTED_EXIT_CODE, f"after {rounds} rounds:\n{output}"
    assert "Traceback" not in output, output
    assert output.count("SIGTERM again; the checkpoint is saved, finishing the exit (75)") <= 1


def test_sigterm_to_every_process_after_a_saved_sigusr1_stop_blames_no_rank(tmp_path, start_cli):
    """What SLURM does to a job that rank 0 requeued after SIGUSR1 (the batch recipe with
    ``--signal=B:USR1@120`` and ``exec trainkit``): SIGTERM to every process of the job."""
    run, stderr = start_training(tmp_path, start_cli, devices=2)
    targets = processes(run)
    run.send_signal(signal.SIGUSR1)
    wait_until_every_rank_saved(run, ranks=2)
    rounds = storm(targets, signal.SIGTERM, run)
    output = stderr.finish()
    assert run.returncode == PREEMPTED_EXIT_CODE, f"after {rounds} rounds:\n{output}"
    assert "preempted (SIGUSR1): every rank saved its state" in output, output
    assert "was killed by" not in output and "second SIG" not in output, output
    noted = "trainkit: SIGTERM after SIGUSR1; every rank has saved its state, finishing the exit"
    assert output.count(noted) <= 1, output
