"""Runs that would go wrong silently get one warning line, once: an optimizer section replacing
the module's configure_optimizers, an epoch shorter than log_every_n_steps (an epoch-level
self.log without sync_dist under ranks: tests/integration/launch/test_rank_warnings.py); and the
startup table says which optimizer and how many threads the run uses."""

from __future__ import annotations

import sys

import pytest
import torch

from tests.helpers.command_env import REPO
from trainkit.cli import main

CONFIG = str(REPO / "configs" / "autoencoder.yaml")
SHORT = [
    "--trainer.max_epochs=1",
    "--trainer.limit_train_batches=4",
    "--trainer.limit_val_batches=1",
]


@pytest.fixture
def fit(tmp_path, capsys, monkeypatch):
    """``trainkit fit -c autoencoder.yaml ARGS`` in-process: (exit code, stdout, stderr lines)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["trainkit"])

    def run(*args: str) -> tuple[int, str, list[str]]:
        code = main(["fit", "-c", CONFIG, *SHORT, "--trainer.default_root_dir=run", *args])
        out, err = capsys.readouterr()
        return code, out, [line for line in err.splitlines() if line.strip()]

    return run


def row(table: str, name: str) -> str:
    """The value of one row of the plain-text startup table."""
    found = [line.split(name, 1)[1].strip() for line in table.splitlines() if f"  {name}  " in line]
    assert len(found) == 1, table
    return found[0]


def test_an_optimizer_section_overriding_configure_optimizers_is_said_once(fit):
    code, out, err = fit("--optimizer=torch.optim.SGD", "--optimizer.lr=0.05")
    assert code == 0, err
    said = [line for line in err if "will be overridden" in line]
    assert said == [
        "trainkit: warning: AutoEncoder.configure_optimizers will be overridden by the optimizer "
        "section (torch.optim.SGD, lr=0.05); the module's lr=0.01 (hparams.yaml) is not used; "
        "remove the optimizer section to use AutoEncoder's own"
    ], err
    assert row(out, "optimizer") == "SGD (from the optimizer section)"
    assert row(out, "configured lr") == "0.05"


def test_the_modules_own_optimizer_is_named_in_the_table_without_a_warning(fit):
    code, out, err = fit()
    assert code == 0, err
    assert not [line for line in err if "overridden" in line], err
    assert row(out, "optimizer") == "Adam (from AutoEncoder.configure_optimizers)"


def test_an_epoch_shorter_than_the_logging_interval_is_warned_once(fit):
    code, _, err = fit("--trainer.max_epochs=2")
    assert code == 0, err
    said = [line for line in err if "logging interval" in line]
    assert said == [
        "trainkit: warning: The number of training batches (4) is smaller than the logging "
        "interval Trainer(log_every_n_steps=50). Set a lower value for log_every_n_steps if you "
        "want to see logs for the training epoch (--trainer.log_every_n_steps N)"
    ], err
    code, _, err = fit("--trainer.log_every_n_steps=2")
    assert code == 0 and not [line for line in err if "logging interval" in line], err


def test_one_process_takes_its_share_of_the_cpus_and_the_table_says_so(fit, monkeypatch):
    """As a rank does: torch's default may count CPUs this process cannot run on."""
    import os

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    before = torch.get_num_threads()
    cpus = len(os.sched_getaffinity(0))
    try:
        torch.set_num_threads(cpus + 3)  # as torch's default on a machine it shares
        code, out, err = fit()
        assert code == 0, err
        assert torch.get_num_threads() == cpus
        assert row(out, "threads per process") == (
            f"{cpus} ({cpus} CPUs shared by 1 process; OMP_NUM_THREADS overrides)"
        )
        monkeypatch.setenv("OMP_NUM_THREADS", "1")  # the user's choice stands
        torch.set_num_threads(1)
        code, out, err = fit()
        assert code == 0 and torch.get_num_threads() == 1, err
        expected = "1 (1 CPUs shared by 1 process; OMP_NUM_THREADS overrides)"
        assert row(out, "threads per process") in (expected, "1 (OMP_NUM_THREADS)")
    finally:
        torch.set_num_threads(before)
