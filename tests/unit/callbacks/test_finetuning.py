"""BaseFinetuning and BackboneFinetuning: frozen until their epoch, then trained with their own
parameter group and learning rate; a resumed fit continues exactly."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.nn import functional as F

from tests.helpers.models import regression_loader
from trainkit import Trainer, TrainModule
from trainkit.callbacks import BackboneFinetuning, BaseFinetuning, Callback
from trainkit.errors import MisconfigurationError


class Transfer(TrainModule):
    """A backbone and a head; the optimizer takes only what trains (Lightning's advice)."""

    def __init__(self, lr: float = 0.01, all_params: bool = False) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.backbone = nn.Sequential(nn.Linear(4, 8), nn.Tanh())
        self.head = nn.Linear(8, 1)
        self.lr, self.all_params = lr, all_params

    def training_step(self, batch, batch_idx):
        x, y = batch
        return F.mse_loss(self.head(self.backbone(x)), y)

    def configure_optimizers(self):
        params = (
            self.parameters()
            if self.all_params
            else filter(lambda p: p.requires_grad, self.parameters())
        )
        return torch.optim.SGD(params, lr=self.lr)


class Probe(Callback):
    """At each epoch end: the backbone's weight, whether it trains, the groups' learning rates."""

    def __init__(self) -> None:
        self.weights, self.trains, self.lrs = [], [], []

    def on_train_epoch_end(self, trainer, module):
        self.weights.append(module.backbone[0].weight.detach().clone())
        self.trains.append(module.backbone[0].weight.requires_grad)
        self.lrs.append([group["lr"] for group in trainer.optimizers[0].param_groups])


def fit(root, *callbacks, model=None, max_epochs=4, ckpt_path=None):
    trainer = Trainer(
        accelerator="cpu",
        max_epochs=max_epochs,
        default_root_dir=str(root),
        enable_progress_bar=False,
        enable_model_summary=False,
        logger=False,
        callbacks=list(callbacks),
    )
    model = model or Transfer()
    trainer.fit(model, regression_loader(), ckpt_path=ckpt_path)
    return trainer, model


def test_backbone_frozen_until_its_epoch_then_trained_with_its_own_rate(tmp_path):
    probe = Probe()
    initial = Transfer().backbone[0].weight.detach().clone()
    fit(tmp_path, BackboneFinetuning(unfreeze_backbone_at_epoch=2), probe)
    assert probe.trains == [False, False, True, True]
    assert torch.equal(probe.weights[0], initial) and torch.equal(probe.weights[1], initial)
    assert not torch.equal(probe.weights[2], initial)
    assert not torch.equal(probe.weights[3], probe.weights[2])
    # 0.1 x the head's rate when unfrozen, then x2 (multiplicative) each epoch
    assert probe.lrs == [[0.01], [0.01], [0.01, 0.001], [0.01, 0.002]]


def test_the_backbone_rate_never_exceeds_the_head_rate_when_aligned(tmp_path):
    probe = Probe()
    fast = BackboneFinetuning(1, lambda epoch: 10.0, backbone_initial_ratio_lr=0.5)
    fit(tmp_path, fast, probe)
    assert probe.lrs == [[0.01], [0.01, 0.005], [0.01, 0.01], [0.01, 0.01]]


def test_a_resumed_finetuning_fit_continues_exactly(tmp_path):
    _, straight = fit(tmp_path / "a", BackboneFinetuning(1), max_epochs=4)
    first, _ = fit(tmp_path / "b", BackboneFinetuning(1), max_epochs=3)
    last = first.checkpoint_callback.last_model_path
    state = torch.load(last, weights_only=True)["callbacks"]["BackboneFinetuning"]
    assert state["previous_backbone_lr"] == pytest.approx(0.002)
    assert [len(g["params"]) for g in state["internal_optimizer_metadata"][0]] == [2, 2]
    resumed_trainer, resumed = fit(tmp_path / "c", BackboneFinetuning(1), ckpt_path=last)
    assert len(resumed_trainer.optimizers[0].param_groups) == 2
    assert resumed.backbone[0].weight.requires_grad
    for key, value in straight.state_dict().items():
        assert torch.equal(resumed.state_dict()[key], value), key


class UnfreezeFirstLayer(BaseFinetuning):
    """Freezes the whole backbone, then unfreezes its first layer at epoch 1 (default rate)."""

    def freeze_before_training(self, pl_module):
        self.freeze(pl_module.backbone, train_bn=False)

    def finetune_function(self, pl_module, epoch, optimizer):
        if epoch == 1:
            self.unfreeze_and_add_param_group(pl_module.backbone[0], optimizer)


def test_a_custom_finetuning_gets_the_default_group_rate(tmp_path):
    probe = Probe()
    fit(tmp_path, UnfreezeFirstLayer(), probe, max_epochs=2)
    assert probe.trains == [False, True]
    assert probe.lrs == [[0.01], [0.01, pytest.approx(0.001)]]  # the first group's / 10


def test_parameters_already_in_the_optimizer_are_skipped_with_a_warning(tmp_path):
    probe = Probe()
    with pytest.warns(UserWarning, match="already exist within another group"):
        fit(tmp_path, UnfreezeFirstLayer(), probe, model=Transfer(all_params=True), max_epochs=2)
    assert probe.lrs == [[0.01], [0.01]] and probe.trains == [False, True]


def test_backbone_finetuning_needs_a_backbone(tmp_path):
    class NoBackbone(Transfer):
        def __init__(self):
            super().__init__()
            self.body = self.backbone
            del self.backbone

        def training_step(self, batch, batch_idx):
            return F.mse_loss(self.head(self.body(batch[0])), batch[1])

    class Freezes(BackboneFinetuning):
        def freeze_before_training(self, pl_module):
            self.freeze(pl_module.body)

    with pytest.raises(MisconfigurationError, match="needs a module attribute `backbone`"):
        fit(tmp_path, Freezes(), model=NoBackbone())


def test_freeze_keeps_batchnorm_training_unless_asked():
    net = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2), nn.Sequential(nn.Linear(2, 3)))
    assert [type(m) for m in BaseFinetuning.flatten_modules(net)] == [
        nn.Linear, nn.BatchNorm1d, nn.Linear
    ]  # fmt: skip
    BaseFinetuning.freeze(net)
    assert [p.requires_grad for p in net.parameters()] == [False, False, True, True, False, False]
    assert len(list(BaseFinetuning.filter_params(net, train_bn=False, requires_grad=False))) == 4
    BaseFinetuning.freeze(net, train_bn=False)
    assert not any(p.requires_grad for p in net.parameters()) and not net[1].track_running_stats
    BaseFinetuning.make_trainable([net[1], net[2]])
    assert [p.requires_grad for p in net.parameters()] == [False, False, True, True, True, True]
