"""Importing trainkit.callbacks in a new interpreter loads no drawing library and no
callback module until a callback is used."""

from __future__ import annotations

import subprocess
import sys

from tests.helpers.command_env import cli_env


def test_importing_the_callbacks_loads_no_drawing_library_and_no_callback_module():
    code = (
        "import sys, trainkit.callbacks; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('rich', 'tqdm', 'torch') "
        "or m.startswith('trainkit.callbacks.') and m != 'trainkit.callbacks.base'))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=cli_env(), check=True
    ).stdout
    assert out.strip() == "[]"
