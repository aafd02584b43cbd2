"""dp: one process, batch split across devices, outputs gathered for *_step_end (CPU-simulated)."""

from __future__ import annotations

import pytest
import torch
from torch.nn import functional as F

from tests.helpers.models import Regression, regression_loader
from trainkit.errors import ConfigError
from trainkit.strategies.dp import gather_outputs, split_batch


def test_split_and_gather_follow_data_parallel_semantics():
    batch = [torch.arange(10.0), {"y": torch.arange(10.0) * 2}]
    chunks = split_batch(batch, 3)
    assert [len(c[0]) for c in chunks] == [4, 4, 2]
    assert torch.equal(chunks[2][1]["y"], torch.tensor([16.0, 18.0]))
    gathered = gather_outputs(
        [
            {"loss": torch.tensor(1.0), "pred": torch.ones(2)},
            {"loss": torch.tensor(3.0), "pred": torch.zeros(2)},
        ]
    )
    assert torch.equal(gathered["loss"], torch.tensor([1.0, 3.0])) and gathered["pred"].shape == (
        4,
    )


def weights(make_trainer, model, **kwargs):
    torch.manual_seed(0)
    make_trainer(max_epochs=3, **kwargs).fit(model, regression_loader(batch_size=8))
    return model.layer.weight.detach().clone()


def test_dp_without_step_end_averages_device_losses_and_matches_one_device(make_trainer):
    torch.manual_seed(0)
    single = weights(make_trainer, Regression(lr=0.1))
    torch.manual_seed(0)
    split = weights(make_trainer, Regression(lr=0.1), strategy="dp", devices=2)
    torch.testing.assert_close(split, single, rtol=1e-5, atol=1e-6)


class FullBatchLoss(Regression):
    """Returns per-sample predictions; the loss is computed over the whole gathered batch."""

    def __init__(self):
        super().__init__(lr=0.1)
        self.step_end_sizes: list[int] = []
        self.val_sizes: list[int] = []

    def training_step(self, batch, batch_idx):
        x, y = batch
        return {"pred": self(x), "target": y}

    def training_step_end(self, outputs):
        self.step_end_sizes.append(len(outputs["pred"]))
        loss = F.mse_loss(outputs["pred"], outputs["target"])
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        return {"pred": self(x), "target": y}

    def validation_step_end(self, outputs):
        self.val_sizes.append(len(outputs["pred"]))
        self.log("val_loss", F.mse_loss(outputs["pred"], outputs["target"]))


def test_step_end_sees_the_whole_batch_and_matches_one_device(make_trainer):
    torch.manual_seed(0)
    model = FullBatchLoss()
    make_trainer(max_epochs=3, strategy="dp", devices=2).fit(
        model, regression_loader(batch_size=8), regression_loader()
    )
    assert set(model.step_end_sizes) == {8}
    torch.manual_seed(0)
    reference = FullBatchLoss()
    make_trainer(max_epochs=3).fit(reference, regression_loader(batch_size=8), regression_loader())
    torch.testing.assert_close(model.layer.weight, reference.layer.weight, rtol=1e-5, atol=1e-6)


def test_dp_validation_and_bf16(make_trainer):
    model = FullBatchLoss()
    trainer = make_trainer(max_epochs=2, strategy="dp", devices=2, precision="bf16-mixed")
    trainer.fit(model, regression_loader(), regression_loader())
    assert "val_loss" in trainer.callback_metrics and set(model.val_sizes) == {8}
    predictions = trainer.predict(model, regression_loader(n=16, batch_size=8))
    assert [p.shape for p in predictions] == [(8, 1), (8, 1)]  # gathered from both devices
    assert trainer.effective_batch_size == 8  # dp splits the loader batch; it is not multiplied


def test_dp_on_several_nodes_is_rejected():
    from trainkit import Trainer

    with pytest.raises(ConfigError, match="ddp2"):
        Trainer(accelerator="cpu", devices=2, strategy="dp", num_nodes=2)
