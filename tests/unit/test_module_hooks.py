"""The LightningModule hooks a ported program overrides to change how a step runs:
optimizer_step (LR warm-up), optimizer_zero_grad, backward, lr_scheduler_step, the batch
transfer hooks, predict batch hooks."""

from __future__ import annotations

import pytest
import torch

from tests.helpers.models import Regression, regression_loader


class WarmUp(Regression):
    """Lightning's documented LR warm-up: scale the LR over the first 4 steps."""

    def __init__(self) -> None:
        super().__init__(lr=0.1)
        self.lrs: list[float] = []
        self.closure_losses: list[float] = []

    def optimizer_step(self, epoch, batch_idx, optimizer, optimizer_closure=None):
        for group in optimizer.param_groups:
            group["lr"] = 0.1 * min(1.0, (self.trainer.global_step + 1) / 4)
        self.lrs.append(optimizer.param_groups[0]["lr"])
        optimizer.step(closure=lambda: self.closure_losses.append(optimizer_closure().item()))


def test_an_optimizer_step_override_warms_the_learning_rate_up(make_trainer):
    model = WarmUp()
    make_trainer(max_steps=6).fit(model, regression_loader())
    assert model.lrs == pytest.approx([0.025, 0.05, 0.075, 0.1, 0.1, 0.1])
    assert len(model.closure_losses) == 6  # the closure hands back each step's loss


def test_a_warm_up_override_steps_like_the_plain_loop_once_the_lr_is_reached(make_trainer):
    class NoWarmUp(WarmUp):
        def optimizer_step(self, epoch, batch_idx, optimizer, optimizer_closure=None):
            optimizer.step(closure=optimizer_closure)

    torch.manual_seed(0)
    plain = Regression(lr=0.1)
    make_trainer(max_steps=5).fit(plain, regression_loader())
    torch.manual_seed(0)
    overridden = NoWarmUp()
    make_trainer(max_steps=5).fit(overridden, regression_loader())
    assert torch.equal(plain.layer.weight, overridden.layer.weight)


class KeepsGradients(Regression):
    """Zeroes gradients only every second step, accumulating by hand."""

    def __init__(self) -> None:
        super().__init__()
        self.zeroed_at: list[int] = []

    def optimizer_zero_grad(self, epoch, batch_idx, optimizer):
        if batch_idx % 2 == 1:
            optimizer.zero_grad()
            self.zeroed_at.append(batch_idx)


def test_an_optimizer_zero_grad_override_decides_when_gradients_clear(make_trainer):
    model = KeepsGradients()
    make_trainer(max_steps=4).fit(model, regression_loader())
    assert model.zeroed_at == [1, 3]


class RetainsGraph(Regression):
    def __init__(self) -> None:
        super().__init__()
        self.backward_calls = 0

    def backward(self, loss, *args, **kwargs):
        self.backward_calls += 1
        loss.backward(retain_graph=True)


def test_a_backward_override_runs_the_backward_pass(make_trainer):
    model = RetainsGraph()
    before = model.layer.weight.detach().clone()
    make_trainer(max_steps=3).fit(model, regression_loader())
    assert model.backward_calls == 3 and not torch.equal(before, model.layer.weight)


class EpochScheduler:
    """A timm-style scheduler: ``step(epoch)`` with the epoch, not torch's ``step()``."""

    def __init__(self, optimizer) -> None:
        self.optimizer = optimizer
        self.epochs: list[int] = []

    def step(self, epoch: int) -> None:
        self.epochs.append(epoch)

    def state_dict(self):
        return {"epochs": self.epochs}

    def load_state_dict(self, state):
        self.epochs = state["epochs"]


class TimmStyle(Regression):
    def configure_optimizers(self):
        optimizer = torch.optim.SGD(self.parameters(), lr=0.05)
        self.scheduler = EpochScheduler(optimizer)
        return {"optimizer": optimizer, "lr_scheduler": {"scheduler": self.scheduler}}

    def lr_scheduler_step(self, scheduler, metric=None):
        scheduler.step(epoch=self.current_epoch)


def test_an_lr_scheduler_step_override_steps_a_scheduler_of_another_signature(make_trainer):
    model = TimmStyle()
    make_trainer(max_epochs=3).fit(model, regression_loader())
    assert model.scheduler.epochs == [0, 1, 2]


class Pair:
    """A batch type of the user's own: the default transfer cannot know it."""

    def __init__(self, x, y) -> None:
        self.x, self.y = x, y


class CustomBatch(Regression):
    def __init__(self) -> None:
        super().__init__()
        self.seen: list[str] = []
        self.predict_starts: list[int] = []

    def on_before_batch_transfer(self, batch, dataloader_idx):
        self.seen.append("before")
        return Pair(*batch)

    def transfer_batch_to_device(self, batch, device, dataloader_idx):
        self.seen.append("transfer")
        return Pair(batch.x.to(device), batch.y.to(device))

    def on_after_batch_transfer(self, batch, dataloader_idx):
        self.seen.append("after")
        return batch

    def training_step(self, batch, batch_idx):
        return torch.nn.functional.mse_loss(self(batch.x), batch.y)

    def predict_step(self, batch, batch_idx):
        return self(batch.x)

    def on_predict_batch_start(self, batch, batch_idx, dataloader_idx=0):
        self.predict_starts.append(batch_idx)


def test_batch_transfer_hooks_shape_every_batch_in_order(make_trainer):
    model = CustomBatch()
    trainer = make_trainer(max_steps=2)
    trainer.fit(model, regression_loader())
    assert model.seen == ["before", "transfer", "after"] * 2
    predictions = trainer.predict(model, regression_loader(n=16))
    assert len(predictions) == 2 and model.predict_starts == [0, 1]
