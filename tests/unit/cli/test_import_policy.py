"""What a config's class_path may import: never what runs commands or code by name (os,
subprocess, pickle, importlib, ...), and with TRAINKIT_IMPORT_ALLOWLIST only the packages named
there (plus trainkit, torch and torchmetrics). Each refusal is one line, exit 2. The allowlist's
tests: tests/integration/cli/test_import_allowlist.py (each in a new interpreter)."""

from __future__ import annotations

import pytest

from trainkit.cli.import_policy import allowlist
from trainkit.errors import ConfigError


@pytest.mark.parametrize(
    ("option", "value", "entry"),
    [
        ("--model", "os.path.join", "os"),
        ("--trainer.callbacks+", "subprocess.Popen", "subprocess"),
        ("--data", "pickle.Unpickler", "pickle"),
    ],
)
def test_a_class_path_that_runs_code_by_name_is_refused(
    run_main, autoencoder_config, option, value, entry
):
    result = run_main("fit", "-c", autoencoder_config, f"{option}={value}")
    assert result.returncode == 2
    (line,) = result.stderr.strip().splitlines()
    assert f"class_path {value!r} names {entry!r}, which a config may not import" in line


def test_allowlist_entries_are_dotted_names():
    assert allowlist({"TRAINKIT_IMPORT_ALLOWLIST": " mine, mine.models ,"}) == [
        "mine",
        "mine.models",
    ]
    for bad in ("my-proj", "jsonargparse", "mine,../x"):
        with pytest.raises(ConfigError, match="TRAINKIT_IMPORT_ALLOWLIST"):
            allowlist({"TRAINKIT_IMPORT_ALLOWLIST": bad})
