"""Hostile and broken input through ``main`` in this process: exit code 2, one line naming
the problem, no traceback, and every file of an earlier run left as it was; each limit
on a config is a setting."""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
from pathlib import Path

import pytest
import torch

from tests.helpers.command_env import REPO
from trainkit.cli import main

CONFIG = str(REPO / "configs" / "autoencoder.yaml")


@pytest.fixture(scope="module")
def earlier_run(tmp_path_factory):
    """A real finished run (AutoEncoder with hidden=8) whose files must survive every case."""
    from trainkit import Trainer, seed_everything
    from trainkit.demos.autoencoder import AutoEncoder, SyntheticDataModule

    root = tmp_path_factory.mktemp("earlier") / "runs"
    seed_everything(1)
    trainer = Trainer(
        accelerator="cpu",
        max_epochs=1,
        limit_train_batches=2,
        limit_val_batches=1,
        default_root_dir=str(root),
        enable_progress_bar=False,
    )
    trainer.fit(AutoEncoder(hidden=8), datamodule=SyntheticDataModule(num_samples=256))
    return root


class RunsACommand:
    """What a malicious checkpoint carries: unpickling it would run a shell command."""

    def __reduce__(self):
        return (os.system, ("echo this must never run",))


def write_inputs(folder: Path, last: Path) -> None:
    """The broken files the cases point at."""
    rows = "\n".join(
        f"{c}: &{c} [{', '.join(['*' + p] * 9)}]" for p, c in zip("abcdefgh", "bcdefghi")
    )
    (folder / "bomb.yaml").write_text(f"a: &a [x, x, x, x, x, x, x, x, x]\n{rows}\nmodel: *i\n")
    (folder / "anchor.yaml").write_text(
        f"big: &big {'x' * 1_000_000}\nmodel:\n  init_args:\n    extra: [{', '.join(['*big'] * 5000)}]\n"
    )
    (folder / "latin1.yaml").write_bytes(b"trainer:\n  max_epochs: 1 # caf\xe9\n")
    (folder / "binary.yaml").write_bytes(bytes(range(256)) * 8)
    (folder / "list.yaml").write_text("- 1\n- 2\n")
    (folder / "syntax.yaml").write_text("trainer: {max_epochs: 3\n")
    (folder / "afile").write_text("a file, not a folder")
    (folder / "empty.ckpt").write_bytes(b"")
    (folder / "garbage.ckpt").write_bytes(os.urandom(4096))
    blob = last.read_bytes()
    (folder / "truncated.ckpt").write_bytes(blob[: len(blob) // 2])
    weights = torch.load(last, weights_only=True)["state_dict"]
    largest = max(weights.values(), key=lambda tensor: tensor.numel()).numpy().tobytes()
    inside = blob.index(largest) + len(largest) // 2  # inside the weights' bytes, not padding
    flipped = bytearray(blob)
    flipped[inside] ^= 0xFF  # a bit pattern torch loads as is, without a check
    (folder / "flipped.ckpt").write_bytes(bytes(flipped))
    torch.save({"state_dict": {}, "thing": Path("/x")}, folder / "pickled.ckpt")
    torch.save({"state_dict": {}, "payload": RunsACommand()}, folder / "malicious.ckpt")
    full = torch.load(last, weights_only=True)
    torch.save({"state_dict": full["state_dict"]}, folder / "weights_only.ckpt")
    renamed = dict(full, state_dict={f"net.{k}": v for k, v in full["state_dict"].items()})
    torch.save(renamed, folder / "other_model.ckpt")
    (folder / "folder.ckpt").mkdir()


FIT = ["fit", "-c", CONFIG]


CASES: dict[str, tuple[list[str], dict[str, str], str]] = {
    # config files
    "yaml bomb": (["fit", "-c", "bomb.yaml"], {}, "values once its YAML aliases are expanded"),
    "huge anchors": (["fit", "-c", "anchor.yaml"], {}, "YAML aliases expand the document"),
    "non-UTF-8 config": (["fit", "-c", "latin1.yaml"], {}, "'latin1.yaml' is not UTF-8"),
    "binary config": (["fit", "-c", "binary.yaml"], {}, "is not UTF-8"),
    "config is a list": (["fit", "-c", "list.yaml"], {}, "Unexpected config"),
    "config syntax error": (["fit", "-c", "syntax.yaml"], {}, "'syntax.yaml' is not valid YAML"),
    "config is a folder": (["fit", "-c", "."], {}, "not a file"),
    # classes
    "class outside installed modules": (
        [*FIT, "--model", "nonexistent_pkg.Model"],
        {},
        "module 'nonexistent_pkg' was not found",
    ),
    "class that is no TrainModule": ([*FIT, "--model", "torch.nn.Linear"], {}, "TrainModule"),
    "class_path naming a function": ([*FIT, "--model", "os.path.join"], {}, "'os.path.join'"),
    "unknown data class": ([*FIT, "--data", "nope.Data"], {}, "module 'nope' was not found"),
    "unknown optimizer": ([*FIT, "--optimizer", "torch.optim.Nope"], {}, "torch.optim.Nope"),
    # absurd values
    "batch size 0": ([*FIT, "--data.init_args.batch_size", "0"], {}, "data.batch_size 0"),
    "negative batch size": ([*FIT, "--data.init_args.batch_size", "-3"], {}, "batch_size -3"),
    "devices 10**9": ([*FIT, "--trainer.devices", str(10**9)], {}, "at most 1024 devices"),
    "a huge device range": ([*FIT, "--trainer.devices", "0-99999999999"], {}, "name GPUs"),
    "more CPU processes than sane": ([*FIT, "--trainer.devices", "500"], {}, "CPU processes"),
    "max_epochs -5": ([*FIT, "--trainer.max_epochs", "-5"], {}, "trainer.max_epochs -5"),
    "max_steps -5": ([*FIT, "--trainer.max_steps", "-5"], {}, "trainer.max_steps -5"),
    "min_epochs -1": ([*FIT, "--trainer.min_epochs", "-1"], {}, "trainer.min_epochs -1"),
    "limit_train_batches -1": ([*FIT, "--trainer.limit_train_batches", "-1"], {}, "-1"),
    "gradient_clip_val -1": ([*FIT, "--trainer.gradient_clip_val", "-1"], {}, "clip_val -1.0"),
    "seed -1": ([*FIT, "--seed_everything", "-1"], {}, "seed_everything -1"),
    "seed 2**40": ([*FIT, "--seed_everything", str(2**40)], {}, str(2**40)),
    "num_sanity_val_steps -5": ([*FIT, "--trainer.num_sanity_val_steps", "-5"], {}, "steps -5"),
    "learning rate -1": ([*FIT, "--model.init_args.lr", "-1"], {}, "model.lr -1.0"),
    "val_check_interval past the epoch": (
        [*FIT, "--trainer.val_check_interval", str(10**9)],
        {},
        "at most the",
    ),
    "num_nodes 0": ([*FIT, "--trainer.num_nodes", "0"], {}, "trainer.num_nodes 0"),
    "accumulate_grad_batches 0": ([*FIT, "--trainer.accumulate_grad_batches", "0"], {}, "0"),
    # checkpoints
    "checkpoint of another model": (
        [*FIT, "--ckpt_path", "other_model.ckpt"],
        {},
        "missing keys [encoder.0.weight",
    ),
    "checkpoint with other shapes": (
        [*FIT, "--ckpt_path", "runs/last.ckpt"],
        {},
        "shape mismatches (checkpoint vs model) [encoder.0.weight [8, 32] vs [64, 32]",
    ),
    "random bytes as checkpoint": ([*FIT, "--ckpt_path", "garbage.ckpt"], {}, "corrupted"),
    "truncated checkpoint": ([*FIT, "--ckpt_path", "truncated.ckpt"], {}, "truncated"),
    "checkpoint with a flipped byte": (
        ["validate", "-c", CONFIG, "--ckpt_path", "flipped.ckpt"],
        {},
        "checkpoint 'flipped.ckpt' is damaged: its entry",
    ),
    "empty checkpoint": (["validate", "-c", CONFIG, "--ckpt_path", "empty.ckpt"], {}, "truncated"),
    "pickled objects in a checkpoint": (
        ["test", "-c", CONFIG, "--ckpt_path", "pickled.ckpt"],
        {},
        "checkpoint_weights_only: false",
    ),
    "a malicious pickle in a checkpoint names the global": (
        ["test", "-c", CONFIG, "--ckpt_path", "malicious.ckpt"],
        {},
        "(the global posix.system, which loading would run)",
    ),
    "weights-only file to resume fit": (
        [*FIT, "--ckpt_path", "weights_only.ckpt"],
        {},
        "holds no optimizer_states",
    ),
    "folder that is no checkpoint": ([*FIT, "--ckpt_path", "folder.ckpt"], {}, "trainkit.pt"),
    # where to write, environment
    "log folder under a file": (
        [*FIT, "--trainer.default_root_dir", "afile/runs"],
        {},
        "default_root_dir 'afile/runs'",
    ),
    "log folder nobody can create": (
        [*FIT, "--trainer.default_root_dir", "/proc/trainkit-runs"],
        {},
        "default_root_dir '/proc/trainkit-runs'",
    ),
    "unknown backend": (
        [*FIT, "--trainer.devices", "2"],
        {"TRAINKIT_DISTRIBUTED_BACKEND": "carrier-pigeon"},
        "'carrier-pigeon'",
    ),
    # rank variables no launcher set (a stale shell, a copied job script): no wait for peers
    "rank variables left in the shell": (
        FIT,
        {"LOCAL_RANK": "0", "WORLD_SIZE": "2"},
        "rank variables 'WORLD_SIZE=2 LOCAL_RANK=0'",
    ),
    "a negative LOCAL_RANK": (FIT, {"LOCAL_RANK": "-1", "WORLD_SIZE": "2"}, "LOCAL_RANK '-1'"),
    "a RANK outside WORLD_SIZE": (
        [*FIT, "--trainer.devices", "2"],
        {"RANK": "5", "WORLD_SIZE": "2", "LOCAL_RANK": "0"},
        "'WORLD_SIZE=2 RANK=5 LOCAL_RANK=0'",
    ),
    "WORLD_SIZE not a number": (FIT, {"WORLD_SIZE": "abc"}, "WORLD_SIZE 'abc'"),
    "MASTER_PORT out of range": (
        [*FIT, "--trainer.devices", "2"],
        {"MASTER_PORT": "99999"},
        "MASTER_PORT '99999'; expected a port number 1-65535",
    ),
    "MASTER_PORT not a number": (
        [*FIT, "--trainer.devices", "2"],
        {"MASTER_PORT": "abc"},
        "MASTER_PORT 'abc'",
    ),
    "MASTER_ADDR that resolves nowhere": (
        [*FIT, "--trainer.devices", "2"],
        {"MASTER_ADDR": "nohost.invalid"},
        "MASTER_ADDR 'nohost.invalid'; expected the host name or address of rank 0's node",
    ),
    "NODE_RANK beyond num_nodes": (
        [*FIT, "--trainer.devices", "2"],
        {"NODE_RANK": "3"},
        "NODE_RANK 3; expected a node index below trainer.num_nodes (1)",
    ),
    "two nodes without MASTER_PORT": (
        [*FIT, "--trainer.devices", "2", "--trainer.num_nodes", "2"],
        {"NODE_RANK": "1", "MASTER_ADDR": "127.0.0.1"},
        "MASTER_PORT ''; expected the port trainkit listens on at rank 0's node, the same on "
        "all 2 nodes",
    ),
    "collective timeout not a number": (
        [*FIT, "--trainer.devices", "2"],
        {"TRAINKIT_COLLECTIVE_TIMEOUT": "soon"},
        "TRAINKIT_COLLECTIVE_TIMEOUT 'soon'",
    ),
}


def snapshot(folder: Path) -> dict[str, str]:
    return {
        str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


@pytest.fixture
def workspace(tmp_path, earlier_run, monkeypatch):
    """tmp_path holds the earlier run under runs/ and the broken inputs; env is restored after."""
    shutil.copytree(earlier_run, tmp_path / "runs")
    last = next((tmp_path / "runs").glob("**/last.ckpt"))
    shutil.copy(last, tmp_path / "runs" / "last.ckpt")
    write_inputs(tmp_path, last)
    monkeypatch.chdir(tmp_path)
    saved_env = dict(os.environ)
    yield tmp_path
    os.environ.clear()
    os.environ.update(saved_env)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("case", list(CASES))
def test_hostile_input_is_one_line_exit_2_and_harms_nothing(case, workspace, capsys, monkeypatch):
    argv, env, named = CASES[case]
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setattr(sys, "argv", ["trainkit"])
    before = snapshot(workspace / "runs")
    exit_code = main(argv)
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert exit_code == 2, err
    assert len(lines) == 1 and lines[0].startswith("trainkit: error: "), err
    assert named in lines[0]
    after = snapshot(workspace / "runs")
    assert {k: after.get(k) for k in before} == before, "an earlier run's file changed"


def test_there_are_at_least_30_hostile_inputs():
    assert len(CASES) + 2 >= 30  # + the two launcher cases below


def test_each_config_limit_is_a_setting():
    from trainkit.cli.input_limits import check_text

    os.environ["TRAINKIT_MAX_CONFIG_DEPTH"] = "2"
    try:
        with pytest.raises(ValueError, match="nesting depth 3; expected at most 2 levels"):
            check_text("a:\n  b: [1]\n", "config file 'x.yaml'")
        os.environ["TRAINKIT_MAX_CONFIG_DEPTH"] = "lots"
        with pytest.raises(ValueError, match="TRAINKIT_MAX_CONFIG_DEPTH 'lots'"):
            check_text("a: 1\n", "config file 'x.yaml'")
    finally:
        del os.environ["TRAINKIT_MAX_CONFIG_DEPTH"]
    check_text("a:\n  b: [1, {c: 2}]\n", "config file 'x.yaml'")  # ordinary configs pass
