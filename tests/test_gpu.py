"""GPU-only paths (16-mixed with GradScaler, bf16 on CUDA, nccl). Skipped without CUDA."""

from __future__ import annotations

import pytest
import torch

from tests.helpers.command_env import REPO
from tests.helpers.models import Regression, regression_loader
from tests.helpers.pace import wall

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]


@pytest.mark.parametrize("precision", ["32", "16-mixed", "bf16-mixed"])
def test_trains_on_one_gpu_with_each_precision(make_trainer, precision):
    seen = {}

    class Probe(Regression):
        def training_step(self, batch, batch_idx):
            seen["device"] = batch[0].device
            seen["dtype"] = self(batch[0]).dtype
            return super().training_step(batch, batch_idx)

    model = Probe(lr=0.05)
    trainer = make_trainer(accelerator="gpu", devices=1, max_epochs=5, precision=precision)
    trainer.fit(model, regression_loader())
    assert seen["device"].type == "cuda"
    assert (
        seen["dtype"]
        == {"32": torch.float32, "16-mixed": torch.float16, "bf16-mixed": torch.bfloat16}[precision]
    )
    assert trainer.callback_metrics["train_loss"].item() < 1.0
    if precision == "16-mixed":
        assert trainer.precision_plugin.scaler.get_scale() > 0


def test_scaler_state_round_trips_through_checkpoints(tmp_path):
    from trainkit import Trainer

    trainer = Trainer(
        accelerator="gpu",
        devices=1,
        precision="16-mixed",
        max_epochs=1,
        default_root_dir=str(tmp_path),
        enable_progress_bar=False,
    )
    trainer.fit(Regression(), regression_loader())
    checkpoint = torch.load(trainer.checkpoint_callback.last_model_path, weights_only=True)
    assert "scale" in checkpoint["precision_scaler"]


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 GPUs")
def test_ddp_over_nccl_on_two_gpus(run_cli, tmp_path):
    result = run_cli(
        "fit",
        "-c",
        str(REPO / "configs" / "autoencoder.yaml"),
        "--trainer.accelerator",
        "gpu",
        "--trainer.devices",
        "0,1",
        "--trainer.max_epochs",
        "1",
        "--trainer.default_root_dir",
        str(tmp_path),
        timeout=wall(300),
    )
    assert result.returncode == 0, result.stderr
    assert "nccl" in result.stdout


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 GPUs")
@pytest.mark.parametrize("precision", ["32", "16-mixed", "bf16-mixed"])
def test_dp_splits_the_batch_over_two_gpus(make_trainer, precision):
    devices_seen = set()

    class Probe(Regression):
        def training_step(self, batch, batch_idx):
            devices_seen.add(batch[0].device)
            return super().training_step(batch, batch_idx)

    trainer = make_trainer(
        accelerator="gpu", devices=2, strategy="dp", max_epochs=2, precision=precision
    )
    trainer.fit(Probe(), regression_loader())
    assert devices_seen == {torch.device("cuda", 0), torch.device("cuda", 1)}


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 GPUs")
def test_sharded_fp16_uses_the_sharded_grad_scaler(run_cli, tmp_path):
    from fairscale.optim.grad_scaler import ShardedGradScaler

    from trainkit import Trainer

    trainer = Trainer(accelerator="gpu", devices=2, strategy="ddp_sharded", precision="16-mixed")
    assert isinstance(trainer.precision_plugin.scaler, ShardedGradScaler)
    result = run_cli(
        "fit",
        "-c",
        str(REPO / "configs" / "sharded.yaml"),
        "--trainer.accelerator",
        "gpu",
        "--trainer.precision",
        "16-mixed",
        "--trainer.default_root_dir",
        str(tmp_path),
        timeout=wall(300),
    )
    assert result.returncode == 0, result.stderr
