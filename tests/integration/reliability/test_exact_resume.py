"""Resuming from a mid-epoch checkpoint ends bitwise equal to the run that was never stopped."""

from __future__ import annotations

import pytest
import torch

from tests.helpers.command_env import cli_env
from tests.integration.reliability.runs import (
    assert_same_weights,
    checkpoints,
    logged_at_epoch,
    write_config,
)


@pytest.mark.timeout(180)
@pytest.mark.parametrize(
    ("devices", "workers", "train_size"),
    # with workers, 56 samples put the checkpoint at an odd batch: the next one is the second
    # worker's, so a resume that restarted the workers' round-robin would be caught
    [(1, 0, 48), (2, 0, 48), (2, 2, 56)],
    ids=["1rank", "2ranks", "2ranks-2workers"],
)
def test_resume_from_a_mid_epoch_checkpoint_is_bitwise_exact(
    tmp_path, run_main, no_leftovers, straight_run, devices, workers, train_size
):
    config = write_config(tmp_path, devices=devices, workers=workers, train_size=train_size)
    if workers:
        straight = run_main(
            "fit",
            "-c",
            str(config),
            "--trainer.default_root_dir",
            str(tmp_path / "straight"),
            env=cli_env(),  # the ranks import the model from tests/
        )
        assert straight.returncode == 0, straight.stderr
        saved = checkpoints(tmp_path / "straight")
    else:  # the shared reference run is this very config
        saved = checkpoints(straight_run(devices).parent.parent)
    batches_per_epoch = train_size // 4 // devices  # batches of 4
    mid = next(  # the first step checkpoint inside the second epoch, not at its edge
        name
        for name, path in saved.items()
        if name.startswith("epoch=1-")
        and torch.load(path, weights_only=True)["loops"]["batches_in_epoch"] % batches_per_epoch
    )
    loops = torch.load(saved[mid], weights_only=True)["loops"]
    assert loops["epoch"] == 1 and not loops["epoch_completed"]
    assert 0 < loops["batches_in_epoch"] < batches_per_epoch

    resumed = run_main(
        "fit",
        "-c",
        str(config),
        "--ckpt_path",
        str(saved[mid]),
        "--trainer.default_root_dir",
        str(tmp_path / "resumed"),
        env=cli_env(),
    )
    assert resumed.returncode == 0, resumed.stderr
    assert_same_weights(saved["last.ckpt"], checkpoints(tmp_path / "resumed")["last.ckpt"])
    assert (
        torch.load(checkpoints(tmp_path / "resumed")["last.ckpt"], weights_only=True)["global_step"]
        == 3 * batches_per_epoch
    )
    # the resumed epoch's mean covers the batches before the checkpoint too
    straight_root = saved["last.ckpt"].parents[2]
    assert logged_at_epoch(tmp_path / "resumed", "train_loss_mean", 1) == logged_at_epoch(
        straight_root, "train_loss_mean", 1
    )


def _fit_with_mid_epoch_validation(root, ckpt_path=None):
    from tests.helpers.resumable import NoisyData, NoisyRegressor
    from trainkit import Trainer, seed_everything
    from trainkit.callbacks import ModelCheckpoint

    class ShuffledValidation(NoisyData):
        def val_dataloader(self):  # a shuffled val loader draws from the global RNG
            return torch.utils.data.DataLoader(
                self.train_dataloader().dataset, batch_size=4, shuffle=True
            )

    seed_everything(7)
    model = NoisyRegressor()
    trainer = Trainer(
        accelerator="cpu",
        max_epochs=2,
        val_check_interval=4,
        limit_val_batches=2,
        default_root_dir=str(root),
        enable_progress_bar=False,
        logger=False,
        callbacks=[ModelCheckpoint(every_n_train_steps=4, save_top_k=-1)],
    )
    trainer.fit(model, datamodule=ShuffledValidation(), ckpt_path=ckpt_path)
    return trainer, model


def test_resume_replays_the_validation_that_followed_the_checkpoint(tmp_path):
    trainer, straight = _fit_with_mid_epoch_validation(tmp_path / "a")
    saved_by = trainer.checkpoint_callback
    assert saved_by is not None and saved_by.dirpath is not None
    mid = f"{saved_by.dirpath}/epoch=1-step=16.ckpt"
    assert torch.load(mid, weights_only=True)["loops"]["batches_in_epoch"] == 4
    resumed_trainer, resumed = _fit_with_mid_epoch_validation(tmp_path / "b", ckpt_path=mid)
    for key, value in straight.state_dict().items():
        assert torch.equal(resumed.state_dict()[key], value), key
    for name in ("train_loss_mean", "val_loss"):
        ours, theirs = resumed_trainer.callback_metrics[name], trainer.callback_metrics[name]
        assert isinstance(ours, torch.Tensor) and isinstance(theirs, torch.Tensor), name
        assert torch.equal(ours, theirs), name


@pytest.mark.timeout(180)
def test_a_two_rank_checkpoint_resumes_on_one_process_after_the_samples_it_trained(
    tmp_path, run_main, straight_run
):
    saved = checkpoints(straight_run(2).parent.parent)  # 6 batches of 4 per rank and epoch
    mid = saved["epoch=1-step=10.ckpt"]
    assert torch.load(mid, weights_only=True)["loops"]["batches_in_epoch"] == 4
    resumed = run_main(
        "fit",
        "-c",
        str(write_config(tmp_path, devices=1)),
        "--ckpt_path",
        str(mid),
        "--trainer.default_root_dir",
        str(tmp_path),
        env=cli_env(),
    )
    out, err = resumed.stdout, resumed.stderr
    assert resumed.returncode == 0, err
    assert "saved by 2 rank(s) and resumes on 1" in out
    assert "goes on after the 32 samples it had trained (8 batches per rank skipped" in out
    last = torch.load(checkpoints(tmp_path)["last.ckpt"], weights_only=True)
    assert last["global_step"] == 10 + 4 + 12  # the 4 batches left of epoch 1's 12, then epoch 2
    assert last["world_size"] == 1
