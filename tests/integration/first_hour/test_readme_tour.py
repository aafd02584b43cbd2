"""The README's five-minute tour, run as a new user would: its files written as shown, its
commands typed in order in that folder (2 ranks included), each one succeeding."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import yaml

from tests.helpers.command_env import REPO, cli_env, run_captured

README = (REPO / "README.md").read_text()
FENCED = r"\n```[a-z]*\n(.*?)\n```"


def tour_files() -> dict[str, str]:
    return dict(re.findall(r"<!-- tour-file: (\S+) -->" + FENCED, README, re.S))


def tour_commands() -> list[str]:
    (block,) = re.findall(r"<!-- tour-commands -->" + FENCED, README, re.S)
    return [line.split("  #")[0].strip() for line in block.splitlines() if line.strip()]


def run(command: str, folder: Path) -> subprocess.CompletedProcess:
    """One README line: ``trainkit ARGS [> FILE]``, with the installed console script when
    there is one (else ``python -m trainkit``)."""
    words = shlex.split(command)
    target = None
    if ">" in words:
        words, target = words[: words.index(">")], words[words.index(">") + 1]
    assert words[0] == "trainkit"
    script = Path(sys.executable).with_name("trainkit")
    program = [str(script)] if script.exists() else [sys.executable, "-m", "trainkit"]
    result = run_captured([*program, *words[1:]], cwd=folder, timeout=480, env=cli_env())
    if target is not None:
        (folder / target).write_text(result.stdout)
    return result


def test_the_tour_shows_a_whole_project():
    assert set(tour_files()) == {"myproj/__init__.py", "config.yaml"}
    stages = [shlex.split(line)[1] for line in tour_commands()]
    assert {"fit", "validate", "test", "predict"} <= set(stages)
    assert any("--trainer.devices 2" in line for line in tour_commands())
    assert any("--ckpt_path last" in line and " fit " in line for line in tour_commands())


@pytest.mark.timeout(900)
def test_every_command_of_the_tour_works_in_a_fresh_folder(tmp_path, no_leftovers):
    for name, text in tour_files().items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text + "\n")
    outputs = {}
    for command in tour_commands():
        result = run(command, tmp_path)
        assert result.returncode == 0, f"{command}\n{result.stderr}"
        outputs[command] = result.stdout

    dry = next(v for k, v in outputs.items() if "--dry_run" in k)
    assert "dry run: the real run would start (exit 0)" in dry and "the whole run" in dry
    runs = sorted((tmp_path / "trainkit_logs").glob("version_*"))
    first, two_ranks, resumed = runs[:3]
    assert (first / "checkpoints" / "last.ckpt").is_file()
    assert "world size                 2" in next(v for k, v in outputs.items() if "devices 2" in k)
    last = torch.load(resumed / "checkpoints" / "last.ckpt", weights_only=True)
    assert last["epoch"] == 4, "the resumed fit did not reach max_epochs 5"
    resume = next(v for k, v in outputs.items() if "--ckpt_path last" in k and " fit " in k)
    loaded = two_ranks / "checkpoints" / "last.ckpt"  # the newest last.ckpt
    (step,) = re.findall(rf"trainkit: loaded {loaded}; resuming at epoch 3, step (\d+)\n", resume)
    steps = int(step) // 3 * 2  # 1 process takes twice the steps per epoch that 2 ranks took
    assert f"resumes at                 epoch 3, step {step} of {int(step) + 2 * steps}" in resume
    assert "fit done in" in resume and f"epoch 5, step {int(step) + 2 * steps}" in resume
    assert (resumed / "predictions.pt").is_file()  # evaluations sit beside the run they load
    assert yaml.safe_load((tmp_path / "resolved.yaml").read_text())["model"]["class_path"] == (
        "myproj.Regressor"
    )
    assert "Predict the sum of 8 numbers" in outputs["trainkit fit --model.help myproj.Regressor"]
    assert "Width of the hidden layer." in outputs["trainkit fit --model.help myproj.Regressor"]
