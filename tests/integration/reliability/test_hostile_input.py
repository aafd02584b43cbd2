"""Config bombs a real process meets in bounded memory: exit code 2 and one line (the 30 and more
cases of the parser and the environment: tests/unit/cli/test_input_limits.py; what the launcher
refuses before any rank starts: tests/unit/distributed/launchers/test_reexec_refusals.py)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.helpers.command_env import REPO, cli_env

CONFIG = str(REPO / "configs" / "autoencoder.yaml")
FIT = ["fit", "-c", CONFIG]


def alias_bomb() -> str:
    """Nine levels of nine aliases each: 9**9 values once expanded, 300 bytes written."""
    levels = [f"a: &a [{', '.join(['x'] * 9)}]"]
    levels += [f"{c}: &{c} [{', '.join(['*' + p] * 9)}]" for p, c in zip("abcdefgh", "bcdefghi")]
    return "{" + ", ".join(levels) + "}"


def interpolation_bomb(folder: Path) -> str:
    """Ten references per level, nine levels: 10**10 characters from a 700-byte file."""
    references = [f"${{s{i - 1}}}" * 10 for i in range(1, 10)]  # level i: ten of level i-1
    lines = ['s0: "xxxxxxxxxx"'] + [f's{i}: "{text}"' for i, text in enumerate(references, 1)]
    (folder / "interp.yaml").write_text(
        "\n".join(lines) + "\ntrainer:\n  default_root_dir: ${s9}\n"
    )
    return "interp.yaml"


def deep_file(folder: Path) -> str:
    (folder / "deep.yaml").write_text("model: " + "[" * 1000 + "]" * 1000 + "\n")
    return "deep.yaml"


BOMBS = {
    "an alias bomb in an option value": (
        lambda folder: [*FIT, "--trainer.callbacks", alias_bomb()],
        "--trainer.callbacks: values once its YAML aliases are expanded ",
    ),
    "an interpolation bomb in a file": (
        lambda folder: ["fit", "-c", interpolation_bomb(folder)],
        "config file 'interp.yaml': 's",
    ),
    "50000 levels of brackets in a value": (
        lambda folder: [*FIT, "--trainer.callbacks", "[" * 50000],
        "--trainer.callbacks: nesting depth 50001; expected at most 64 levels",
    ),
    "1000 levels of brackets in a file": (
        lambda folder: ["fit", "-c", deep_file(folder)],
        "config file 'deep.yaml': nesting depth 1001",
    ),
}


def limit_memory() -> None:
    """3 GiB of address space: torch's import fits; a bomb that expanded would not (12-17 GB)."""
    import resource

    resource.setrlimit(resource.RLIMIT_AS, (3 * 2**30, 3 * 2**30))


@pytest.mark.timeout(120)
@pytest.mark.parametrize("bomb", list(BOMBS))
def test_config_bombs_end_in_one_line_in_bounded_memory(bomb, tmp_path):
    """Before: 12 GB for the alias bomb, killed at 17 GB for the interpolation one, a segfault
    (exit 139, no output) for deep brackets, a 100-line RecursionError at depth 1000."""
    import subprocess

    make_args, named = BOMBS[bomb]
    result = subprocess.run(
        [sys.executable, "-m", "trainkit", *make_args(tmp_path)],
        cwd=tmp_path,
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=200,
        preexec_fn=limit_memory,
    )
    lines = result.stderr.strip().splitlines()
    assert result.returncode == 2, result.stderr[-2000:]
    assert len(lines) == 1 and lines[0].startswith(f"trainkit: error: {named}"), lines
