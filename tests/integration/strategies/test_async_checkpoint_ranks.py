"""Asynchronous checkpoints on 2 gloo ranks under fsdp with per-rank shards: every rank stages its
shards with torch.distributed.checkpoint.async_save and writes them in the background, the folder
appears whole, and resuming from a mid-epoch one ends bitwise equal to the run never stopped."""

from __future__ import annotations

import pytest
import torch
import yaml

from tests.helpers.command_env import cli_env
from trainkit.checkpoint.files import SHARDED_META, load_checkpoint

FSDP_SHARDED_ASYNC = {
    "strategy": {
        "class_path": "trainkit.strategies.FSDPStrategy",
        "init_args": {"auto_wrap_policy": ["Linear"], "state_dict_type": "sharded"},
    },
    "plugins": "AsyncCheckpointIO",
}


def write_config(folder) -> str:
    config = {
        "seed_everything": 7,
        "model": {"class_path": "tests.helpers.resumable.NoisyRegressor"},
        "data": {"class_path": "tests.helpers.resumable.NoisyData"},
        "trainer": {
            "accelerator": "cpu",
            "devices": 2,
            "max_epochs": 2,
            "enable_progress_bar": False,
            "logger": False,
            "callbacks": [
                {
                    "class_path": "trainkit.callbacks.ModelCheckpoint",
                    "init_args": {"every_n_train_steps": 4, "save_top_k": -1},
                }
            ],
            **FSDP_SHARDED_ASYNC,
        },
    }
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return str(path)


def fit(run_main, config, root, *extra):
    done = run_main(
        "fit", "-c", config, *extra, "--trainer.default_root_dir", str(root), env=cli_env()
    )
    assert done.returncode == 0, done.stderr
    return {p.name: p for p in (root / "checkpoints").iterdir()}


@pytest.mark.timeout(320)
def test_fsdp_async_sharded_checkpoints_resume_bitwise_exact(run_main, tmp_path, no_leftovers):
    config = write_config(tmp_path)
    straight = fit(run_main, config, tmp_path / "straight")
    # 12 batches of 4 over 2 ranks: 6 steps an epoch, 12 in all; a checkpoint every 4 steps
    assert sorted(straight) == [
        "epoch=0-step=4.ckpt",
        "epoch=1-step=12.ckpt",
        "epoch=1-step=8.ckpt",
        "last.ckpt",
    ]
    for folder in straight.values():  # whole folders only: every rank's shards and the metadata
        names = sorted(p.name for p in folder.iterdir())
        assert names == [".metadata", "__0_0.distcp", "__1_0.distcp", SHARDED_META], folder
    assert not list((tmp_path / "straight" / "checkpoints").glob(".*.tmp"))

    mid = load_checkpoint(straight["epoch=1-step=8.ckpt"])
    assert mid["global_step"] == 8 and mid["loops"]["batches_in_epoch"] == 2
    resumed = fit(
        run_main,
        config,
        tmp_path / "resumed",
        "--ckpt_path",
        str(straight["epoch=1-step=8.ckpt"]),
    )
    final, expected = load_checkpoint(resumed["last.ckpt"]), load_checkpoint(straight["last.ckpt"])
    assert final["global_step"] == expected["global_step"] == 12
    for key, value in expected["state_dict"].items():
        assert torch.equal(final["state_dict"][key], value), key


@pytest.mark.timeout(120)
def test_staged_shards_are_isolated_from_later_steps(tmp_path):
    """async_save's staging copies the shards: changing the tensors right after the save returned
    does not change the folder written in the background (a one-rank gloo group, in process)."""
    import torch.distributed as dist

    from trainkit.distributed.ports import find_free_port
    from trainkit.plugins import AsyncCheckpointIO

    dist.init_process_group(
        "gloo", init_method=f"tcp://127.0.0.1:{find_free_port()}", rank=0, world_size=1
    )
    try:
        weight = torch.randn(256, 256)
        moment = torch.randn(256, 256)
        at_save = (weight.clone(), moment.clone())
        checkpoint = {
            "state_dict": {"layer.weight": weight},
            "optimizer_states": [{"state": {"layer.weight": {"exp_avg": moment}}}],
            "global_step": 3,
        }
        io = AsyncCheckpointIO()
        path = tmp_path / "last.ckpt"
        io.save_sharded_checkpoint(checkpoint, path, is_writer=True, barrier=dist.barrier)
        weight.add_(1.0)  # the next optimizer step
        moment.mul_(0.5)
        io.teardown()
    finally:
        dist.destroy_process_group()
    saved = load_checkpoint(path)
    assert saved["global_step"] == 3
    assert torch.equal(saved["state_dict"]["layer.weight"], at_save[0])
    assert torch.equal(saved["optimizer_states"][0]["state"]["layer.weight"]["exp_avg"], at_save[1])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["last.ckpt"]
