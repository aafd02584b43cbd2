"""The tuning program (tests/integration/compat/programs/tuner.py) in its own interpreter:
the rate and sizes it finds under trainkit, and the same under Lightning."""

from __future__ import annotations

import math

import pytest
import torch
from torch import nn

from tests.integration.compat.ported import run_program


def weights(model: nn.Module) -> list[torch.Tensor]:
    return [p.detach().clone() for p in model.parameters()]


@pytest.fixture(scope="module")
def trainkit_tuning(tmp_path_factory):
    """The tuning program's result under trainkit, in one process (run once for two tests)."""
    return run_program("tuner", tmp_path_factory.mktemp("tuner"), "1")


@pytest.mark.xdist_group("tuning_program")  # one pytest-xdist worker runs the program once
def test_the_tuning_program_finds_a_rate_and_sizes_under_trainkit(trainkit_tuning):
    lr_find, sizes = trainkit_tuning["lr_find"], trainkit_tuning["sizes"]
    assert lr_find["model_lr"] == lr_find["suggestion"] in lr_find["lr"]
    assert sizes == {
        "power": [32, 32],
        "power datamodule": [16, 16],
        "binsearch": [38, 38],
        "binsearch datamodule": [15, 15],
    }
    assert trainkit_tuning["fit"]["batch_size"] == 8
    assert math.isfinite(trainkit_tuning["metrics"]["train_loss"])


lightning_installed = pytest.mark.skipif(
    __import__("importlib").util.find_spec("lightning") is None,
    reason="Lightning is not installed (pip install 'lightning==2.6.*' to compare with it)",
)


@lightning_installed
@pytest.mark.lightning
@pytest.mark.xdist_group("tuning_program")
@pytest.mark.timeout(300)
def test_lightning_finds_the_same_rate_and_sizes(trainkit_tuning, tmp_path):
    theirs = run_program("tuner", tmp_path, "1", lightning=True)
    ours = trainkit_tuning
    # the same grid of rates, the same smoothed losses, the same suggested grid point
    assert ours["lr_find"]["lr"] == pytest.approx(theirs["lr_find"]["lr"], rel=1e-12)
    assert ours["lr_find"]["loss"] == pytest.approx(theirs["lr_find"]["loss"], rel=1e-5)
    index = theirs["lr_find"]["lr"].index(theirs["lr_find"]["suggestion"])
    assert ours["lr_find"]["suggestion"] == pytest.approx(theirs["lr_find"]["lr"][index])
    assert ours["lr_find"]["model_lr"] == pytest.approx(theirs["lr_find"]["model_lr"])
    assert ours["lr_find"]["weights"] == theirs["lr_find"]["weights"]
    assert ours["sizes"] == theirs["sizes"]
    # the fit with both callbacks: the same rate and size, then the same weights
    assert ours["fit"]["model_lr"] == pytest.approx(theirs["fit"]["model_lr"])
    assert ours["fit"]["batch_size"] == theirs["fit"]["batch_size"]
    assert ours["fit"]["weights"] == pytest.approx(theirs["fit"]["weights"], abs=1e-6)
    assert ours["metrics"] == pytest.approx(theirs["metrics"], abs=1e-6)
