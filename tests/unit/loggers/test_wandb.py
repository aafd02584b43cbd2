"""WandbLogger's arguments and the one line without wandb installed (its offline runs, which
start wandb's service, are in tests/integration/loggers/test_wandb.py)."""

from __future__ import annotations

import inspect
import sys

import pytest

from tests.unit.test_compat_doc import documented_arguments
from trainkit.cli import main
from trainkit.errors import ConfigError
from trainkit.loggers import WandbLogger

pytest.importorskip("wandb", reason="needs wandb: pip install 'trainkit[wandb]'")


def test_arguments_match_the_compat_page_and_bad_values_are_one_line():
    signature = [p for p in inspect.signature(WandbLogger.__init__).parameters if p != "self"]
    assert documented_arguments("WandbLogger") == signature
    with pytest.raises(ConfigError, match=r"log_model 'last'; expected false, true or 'all'"):
        WandbLogger(log_model="last")


def test_without_wandb_the_cli_names_the_install_in_one_line(
    autoencoder_config, tmp_path, capsys, monkeypatch
):
    monkeypatch.setitem(sys.modules, "wandb", None)  # as if wandb were not installed
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", ["trainkit"])
    exit_code = main(["fit", "-c", autoencoder_config, "--trainer.logger", "WandbLogger"])
    assert exit_code == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        "trainkit: error: trainer.logger 'WandbLogger'; expected the wandb package installed; "
        "pip install 'trainkit[wandb]'"
    ]
