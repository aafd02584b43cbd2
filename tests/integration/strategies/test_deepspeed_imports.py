"""deepspeed imported by real ranks: without its autotuner's mlflow, which stays importable."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

from tests.helpers.command_env import cli_env


@pytest.mark.skipif(
    importlib.util.find_spec("deepspeed") is None or importlib.util.find_spec("mlflow") is None,
    reason="needs deepspeed and mlflow installed",
)
@pytest.mark.slow  # starts interpreters
def test_ranks_import_deepspeed_without_its_autotuners_mlflow_which_stays_importable():
    probe = (
        "import sys\n"
        "from trainkit.strategies.deepspeed import import_deepspeed\n"
        "deepspeed = import_deepspeed()\n"
        "print('mlflow imported with deepspeed:', 'mlflow' in sys.modules)\n"
        "import mlflow\n"
        "print('mlflow importable afterwards:', bool(mlflow.__version__))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=240,
        env=cli_env(),
    )
    assert result.returncode == 0, result.stderr
    assert "mlflow imported with deepspeed: False" in result.stdout
    assert "mlflow importable afterwards: True" in result.stdout
