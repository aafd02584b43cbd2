"""Preemption in one process: the exit code, and a stop signal that waits for the
accumulation boundary, then resumes exactly."""

from __future__ import annotations

import os
import signal

import torch

from trainkit import PREEMPTED_EXIT_CODE


def test_the_preempted_exit_code_is_ex_tempfail():
    assert PREEMPTED_EXIT_CODE == 75 == getattr(os, "EX_TEMPFAIL", 75)


def _fit_preempted_at(root, signal_at_batch=None, ckpt_path=None):
    """In-process fit with accumulation 2; a callback signals this process at one batch."""
    from tests.helpers.resumable import NoisyData, NoisyRegressor
    from trainkit import Callback, Trainer, seed_everything

    class SignalSelf(Callback):
        def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
            if trainer.current_epoch == 0 and batch_idx == signal_at_batch:
                os.kill(os.getpid(), signal.SIGTERM)

    seed_everything(7)
    model = NoisyRegressor()
    trainer = Trainer(
        accelerator="cpu",
        max_epochs=2,
        accumulate_grad_batches=2,
        default_root_dir=str(root),
        enable_progress_bar=False,
        logger=False,
        callbacks=[SignalSelf()],
    )
    trainer.fit(model, datamodule=NoisyData(), ckpt_path=ckpt_path)
    return trainer, model


def test_preemption_waits_for_the_accumulation_boundary_and_resumes_exactly(tmp_path):
    _, straight = _fit_preempted_at(tmp_path / "a")
    trainer, _ = _fit_preempted_at(tmp_path / "b", signal_at_batch=4)  # mid-accumulation
    assert trainer.preempted == "SIGTERM"
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # handlers put back
    checkpoint = torch.load(trainer.checkpoint_callback.last_model_path, weights_only=True)
    assert checkpoint["loops"]["batches_in_epoch"] == 6  # stopped after the step at batch 5
    assert checkpoint["global_step"] == 3
    resumed, model = _fit_preempted_at(tmp_path / "b", ckpt_path="last")
    assert resumed.preempted is None and resumed.global_step == 12
    for key, value in straight.state_dict().items():
        assert torch.equal(model.state_dict()[key], value), key
