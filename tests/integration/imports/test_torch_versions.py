"""Every trainkit module imports, in a new interpreter, under a torch without the names
newer than 2.11."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from tests.helpers.command_env import REPO, cli_env
from tests.helpers.torch_versions import NEWER_THAN_2_11


@pytest.mark.slow  # a new interpreter: every trainkit module imported with the names deleted
def test_every_trainkit_module_imports_without_the_newer_names():
    program = textwrap.dedent(f"""
        import importlib, pkgutil, sys
        import torch
        newer = {NEWER_THAN_2_11!r}
        for module, names in newer.items():
            for name in names:
                if hasattr(importlib.import_module(module), name):
                    delattr(importlib.import_module(module), name)
        deleted = [name for names in newer.values() for name in names]
        import trainkit
        failed = []
        for info in pkgutil.walk_packages(trainkit.__path__, "trainkit."):
            try:
                importlib.import_module(info.name)
            except ImportError as error:  # an optional package (horovod...) missing is fine
                if any(name in str(error) for name in deleted):
                    failed.append(f"{{info.name}}: {{error}}")
        print("\\n".join(failed))
        sys.exit(1 if failed else 0)
    """)
    result = subprocess.run(
        [sys.executable, "-c", program],
        capture_output=True,
        text=True,
        timeout=360,
        env=cli_env(),
        cwd=REPO,
    )
    assert result.returncode == 0, result.stdout + result.stderr
