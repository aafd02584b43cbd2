"""Lightning's callbacks on 2 real gloo ranks: every rank runs them
and agrees (stop decisions, checkpoint names, the timer), and only rank 0 prints and writes."""

from __future__ import annotations

import pytest
import torch

from tests.helpers.command_env import REPO

CONFIG = str(REPO / "configs" / "autoencoder.yaml")
CALLBACKS = """
trainer:
  max_epochs: 4
  callbacks:
    - class_path: ModelSummary
    - class_path: GradientAccumulationScheduler
      init_args: {scheduling: {1: 2}}
    - class_path: StochasticWeightAveraging
      init_args: {swa_lrs: 0.005, swa_epoch_start: 3}
    - class_path: Timer
      init_args: {duration: {hours: 1}}
    - class_path: EarlyStopping
      init_args: {monitor: val_loss, patience: 1, min_delta: 1.0e+6, verbose: true}
    - class_path: ModelCheckpoint
      init_args: {dirpath: best, monitor: val_loss, save_top_k: 2, filename: "{epoch}"}
"""


@pytest.mark.timeout(120)
def test_callbacks_on_two_spawned_ranks(start_cli, tmp_path):
    """ddp_spawn: the callbacks are pickled into the ranks, and their states come back."""
    config = tmp_path / "callbacks.yaml"
    config.write_text(CALLBACKS)
    proc = start_cli(
        "fit", "-c", CONFIG, "-c", str(config), "--data.init_args.num_samples", "512",
        "--trainer.devices", "2", "--trainer.strategy", "ddp_spawn",
    )  # fmt: skip
    out, err = proc.communicate(timeout=220)
    assert proc.returncode == 0, err
    assert out.count("Total params") == 1  # the summary on rank 0 only
    # min_delta is huge, so no check improves after the first: patience 1 stops after epoch 1
    assert "Monitored metric val_loss did not improve in the last 1 records" in out
    saved = sorted(p.name for p in (tmp_path / "best").iterdir())
    assert saved == ["epoch=0.ckpt", "epoch=1.ckpt", "last.ckpt"]
    last = torch.load(tmp_path / "best" / "last.ckpt", weights_only=True)
    # 448 training samples over 2 ranks, 64 a batch: 4 batches; then accumulating 2
    assert last["epoch"] == 1 and last["global_step"] == 4 + 2
    assert last["callbacks"]["Timer"]["time_elapsed"]["train"] > 0
