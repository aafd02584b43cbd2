"""Checkpoints: atomic writes, safe loading, full-state round trip, exact resume."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from tests.helpers.models import Regression, regression_loader
from trainkit import Trainer, seed_everything
from trainkit.checkpoint.files import CheckpointError, load_checkpoint, save_checkpoint


class Noisy(Regression):
    """Dropout + Adam + a scheduler: resume must restore RNG, optimizer and scheduler state."""

    def __init__(self, lr: float = 0.02, features: int = 4):
        super().__init__(lr=lr, features=features)
        self.dropout = torch.nn.Dropout(0.3)

    def forward(self, x):
        return self.layer(self.dropout(x))

    def configure_optimizers(self):
        opt = torch.optim.Adam(self.parameters(), lr=self.hparams.lr)
        return {"optimizer": opt, "lr_scheduler": torch.optim.lr_scheduler.StepLR(opt, 1, 0.9)}


def fit(tmp_path, max_epochs=-1, max_steps=-1, ckpt_path=None, version=0):
    seed_everything(3)
    model = Noisy()
    trainer = Trainer(
        accelerator="cpu",
        max_epochs=max_epochs if max_epochs > 0 else None,
        max_steps=max_steps,
        default_root_dir=str(tmp_path),
        enable_progress_bar=False,
        num_sanity_val_steps=1,
    )
    trainer.fit(
        model, regression_loader(shuffle=True), regression_loader(seed=1), ckpt_path=ckpt_path
    )
    return trainer, model


def test_checkpoint_holds_everything_to_resume(tmp_path):
    trainer, model = fit(tmp_path, max_epochs=2)
    checkpoint = load_checkpoint(trainer.checkpoint_callback.last_model_path)
    assert {
        "state_dict",
        "optimizer_states",
        "lr_schedulers",
        "precision_scaler",
        "loops",
        "rng_states",
        "callbacks",
        "hyper_parameters",
        "epoch",
        "global_step",
    } <= set(checkpoint)
    assert checkpoint["loops"] == {
        "epoch": 1,
        "batches_stepped": 16,
        "batches_in_epoch": 8,
        "epoch_completed": True,
    }
    restored = Noisy.load_from_checkpoint(trainer.checkpoint_callback.last_model_path)
    for key, value in model.state_dict().items():
        torch.testing.assert_close(restored.state_dict()[key], value, rtol=0, atol=0)
    assert checkpoint["optimizer_states"][0]["state"][0]["step"].item() == 16


def test_resume_after_an_epoch_matches_an_uninterrupted_run(tmp_path):
    _, straight = fit(tmp_path / "a", max_epochs=4)
    fit(tmp_path / "b", max_epochs=2)
    resumed_trainer, resumed = fit(tmp_path / "b", max_epochs=4, ckpt_path="last")
    assert resumed_trainer.global_step == 32
    for key, value in straight.state_dict().items():
        torch.testing.assert_close(resumed.state_dict()[key], value, rtol=0, atol=0)
    assert resumed_trainer.optimizers[0].param_groups[0]["lr"] == pytest.approx(0.02 * 0.9**4)


def test_resume_mid_epoch_matches_an_uninterrupted_run(tmp_path):
    _, straight = fit(tmp_path / "a", max_steps=13)
    fit(tmp_path / "b", max_steps=5)  # stops after 5 of the epoch's 8 batches
    resumed_trainer, resumed = fit(tmp_path / "b", max_steps=13, ckpt_path="last")
    assert resumed_trainer.global_step == 13
    for key, value in straight.state_dict().items():
        torch.testing.assert_close(resumed.state_dict()[key], value, rtol=0, atol=0)


def test_save_is_atomic_and_leaves_no_temp_files(tmp_path, monkeypatch):
    path = tmp_path / "model.ckpt"
    save_checkpoint({"value": torch.tensor(1)}, path)

    def broken_save(obj, handle):
        handle.write(b"partial")
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", broken_save)
    with pytest.raises(OSError, match="disk full"):
        save_checkpoint({"value": torch.tensor(2)}, path)
    monkeypatch.undo()
    assert load_checkpoint(path)["value"].item() == 1
    assert [p.name for p in tmp_path.iterdir()] == ["model.ckpt"]


def test_weights_only_load_refuses_pickled_objects_unless_opted_out(tmp_path):
    path = tmp_path / "odd.ckpt"
    torch.save({"thing": Path("/x")}, path)
    with pytest.raises(CheckpointError, match="checkpoint_weights_only: false"):
        load_checkpoint(path)
    assert load_checkpoint(path, weights_only=False)["thing"] == Path("/x")


def test_validate_and_test_load_best_and_last(tmp_path):
    fit(tmp_path, max_epochs=2)
    fresh = Trainer(
        accelerator="cpu", default_root_dir=str(tmp_path), logger=False, enable_progress_bar=False
    )
    last = fresh.test(Noisy(), regression_loader(), ckpt_path="last", verbose=False)
    best = fresh.validate(Noisy(), regression_loader(), ckpt_path="best", verbose=False)
    assert last[0]["test_loss"] > 0 and best[0]["val_loss"] > 0
    with pytest.raises(FileNotFoundError, match="does not exist"):
        fresh.test(Noisy(), regression_loader(), ckpt_path=str(tmp_path / "nope.ckpt"))


def test_a_flipped_byte_in_the_weights_is_refused_naming_the_entry(tmp_path):
    """torch.load reads such a file without a word: trainkit checks the zip's CRC-32 first."""
    path = tmp_path / "flipped.ckpt"
    torch.save({"state_dict": {"w": torch.randn(256, 256)}}, path)
    blob = bytearray(path.read_bytes())
    blob[len(blob) // 2] ^= 0xFF  # inside the tensor's bytes
    path.write_bytes(bytes(blob))
    with pytest.raises(CheckpointError, match=r"is damaged: its entry '[^']*data/0' does not"):
        load_checkpoint(path)
    with pytest.raises(CheckpointError, match="is damaged"):
        load_checkpoint(path, mmap=True)  # the pre-flight read checks too


def test_resuming_sweeps_what_a_killed_writer_left_beside_the_checkpoint(make_trainer, tmp_path):
    """The resumed run may write into another version folder: the dead writer's temp file in
    the checkpoint's folder goes when fit resumes from it; a live writer's and another host's stay."""
    import socket

    from tests.helpers.gone_pid import pid_of_no_process
    from tests.helpers.models import Regression, regression_loader
    from trainkit.checkpoint.files import writer_tag

    first = make_trainer(max_epochs=1, enable_checkpointing=True)
    first.fit(Regression(), regression_loader())
    (last,) = tmp_path.glob("**/last.ckpt")
    gone = pid_of_no_process()
    host = socket.gethostname().split(".")[0]
    dead = last.parent / f".last.ckpt.{host}-{gone}.abc123.tmp"
    live = last.parent / f".last.ckpt.{writer_tag()}.def456.tmp"
    elsewhere = last.parent / f".last.ckpt.otherhost-{gone}.ghi789.tmp"
    for temp in (dead, live, elsewhere):
        temp.write_bytes(b"half a checkpoint")
    again = make_trainer(max_epochs=2, default_root_dir=str(tmp_path / "second"))
    again.fit(Regression(), regression_loader(), ckpt_path=str(last))
    assert not dead.exists() and live.exists() and elsewhere.exists()


def test_last_is_the_checkpoint_with_the_most_steps_not_the_newest_file(tmp_path, capsys):
    """``cp -r`` of a run folder makes its older checkpoint the newest file: 'last' goes by how
    far each trained (epochs, then steps x ranks), and says which it chose when several
    compete."""
    import os
    import shutil

    fit(tmp_path / "root" / "early", max_steps=3)
    fit(tmp_path / "root" / "late", max_steps=6)
    early = next((tmp_path / "root" / "early").glob("**/last.ckpt"))
    shutil.copytree(early.parents[2], tmp_path / "root" / "copied")  # the newest file now
    copied = next((tmp_path / "root" / "copied").glob("**/last.ckpt"))
    os.utime(copied)
    capsys.readouterr()
    trainer, _ = fit(tmp_path / "root", max_steps=8, ckpt_path="last")
    said = capsys.readouterr().err
    assert trainer.global_step == 8 and "3 last.ckpt under" in said
    assert "resuming the one trained furthest" in said and "(epoch 0, step 6)" in said
    assert str(copied) in said.split("; not ")[1]


def test_last_with_no_checkpoint_yet_starts_from_the_model_as_built(tmp_path, capsys):
    """A job submitted again with ``--ckpt_path last`` resumes once a checkpoint exists and
    starts fresh before (Lightning warns and starts fresh too)."""
    trainer, _ = fit(tmp_path, max_steps=2, ckpt_path="last")
    assert trainer.global_step == 2
    assert "ckpt_path 'last': no last.ckpt under" in capsys.readouterr().err
    resumed, _ = fit(tmp_path, max_steps=4, ckpt_path="last")
    assert resumed.global_step == 4
