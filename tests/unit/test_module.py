"""The TrainModule API: hook order, self.log semantics, configure_optimizers forms, manual optimization."""

from __future__ import annotations

import pytest
import torch
from torch.nn import functional as F

from tests.helpers.models import Recorder, Regression, regression_loader
from trainkit import DataModule
from trainkit.errors import MisconfigurationError

BATCH_HOOKS = [
    "on_train_batch_start",
    "training_step",
    "on_before_backward",
    "on_after_backward",
    "on_before_optimizer_step",
    "on_before_zero_grad",
    "on_train_batch_end",
]
VALIDATION = [
    "on_validation_start",
    "on_validation_epoch_start",
    "on_validation_batch_start",
    "validation_step",
    "on_validation_batch_end",
    "on_validation_epoch_end",
    "on_validation_end",
]


def test_fit_calls_hooks_in_documented_order(make_trainer):
    model = Recorder()
    trainer = make_trainer(max_epochs=1, limit_train_batches=2, limit_val_batches=1)
    trainer.fit(model, regression_loader(), regression_loader())
    expected = [
        "setup",
        "configure_optimizers",
        "on_fit_start",
        "on_train_start",
        "on_train_epoch_start",
        *BATCH_HOOKS,
        *BATCH_HOOKS,
        *VALIDATION,
        "on_train_epoch_end",
        "on_train_end",
        "on_fit_end",
        "teardown",
    ]
    assert model.calls == expected


def test_sanity_check_runs_validation_before_training(make_trainer):
    model = Recorder()
    trainer = make_trainer(
        max_epochs=1, limit_train_batches=1, limit_val_batches=1, num_sanity_val_steps=1
    )
    trainer.fit(model, regression_loader(), regression_loader())
    first_train = model.calls.index("on_train_start")
    assert model.calls[:first_train].count("validation_step") == 1


def test_the_sanity_check_leaves_the_first_epochs_shuffle_as_without_it(make_trainer):
    """As Lightning (its isolate_rng): iterating the validation loader draws a seed from the
    global generator, which the check must not take from the training shuffle."""

    class FirstBatch(Regression):
        def on_train_batch_start(self, batch, batch_idx):
            self.first = batch[0]

    firsts = []
    for sanity_steps in (0, 2):
        torch.manual_seed(7)
        model = FirstBatch()
        trainer = make_trainer(
            max_epochs=1, limit_train_batches=1, num_sanity_val_steps=sanity_steps
        )
        trainer.fit(model, regression_loader(shuffle=True), regression_loader())
        firsts.append(model.first)
    assert torch.equal(firsts[0], firsts[1])


class StepLogger(Regression):
    def __init__(self, reduce_fx: str = "mean") -> None:
        super().__init__()
        self.reduce_fx = reduce_fx
        self.losses: list[tuple[float, int]] = []

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = F.mse_loss(self(x), y)
        self.losses.append((loss.item(), len(x)))
        self.log("loss", loss, on_step=True, on_epoch=True, reduce_fx=self.reduce_fx, prog_bar=True)
        return loss


@pytest.mark.parametrize("reduce_fx", ["mean", "sum", "max", "min"])
def test_epoch_aggregation_matches_plain_python(make_trainer, reduce_fx):
    model = StepLogger(reduce_fx)
    trainer = make_trainer(max_epochs=1)
    trainer.fit(model, regression_loader(n=60, batch_size=8))  # last batch has 4 samples
    values = [v for v, _ in model.losses]
    expected = {
        "mean": sum(v * n for v, n in model.losses) / sum(n for _, n in model.losses),
        "sum": sum(values),
        "max": max(values),
        "min": min(values),
    }[reduce_fx]
    metrics = trainer.callback_metrics
    assert metrics["loss_epoch"].item() == pytest.approx(expected, rel=1e-5)
    assert metrics["loss_step"].item() == pytest.approx(values[-1], rel=1e-6)
    assert "loss_epoch" in trainer.progress_bar_metrics


def test_validation_logs_default_to_epoch_mean_weighted_by_batch_size(make_trainer):
    model = Regression()
    trainer = make_trainer(max_epochs=1, limit_train_batches=1)
    val = regression_loader(n=20, batch_size=8, seed=3)
    results = trainer.validate(model, val, verbose=False)
    x, y = val.dataset.tensors
    with torch.no_grad():
        expected = F.mse_loss(model(x), y).item()
    assert results[0]["val_loss"] == pytest.approx(expected, rel=1e-5)


def test_log_rejects_unknown_reduce_fx_and_non_scalars(make_trainer):
    class Bad(Regression):
        def training_step(self, batch, batch_idx):
            self.log("x", 1.0, reduce_fx="median")
            return super().training_step(batch, batch_idx)

    with pytest.raises(ValueError, match="median"):
        make_trainer(max_steps=1).fit(Bad(), regression_loader())


def optimizer_forms(model):
    sgd = torch.optim.SGD(model.parameters(), lr=0.1)
    step = torch.optim.lr_scheduler.StepLR(sgd, step_size=1, gamma=0.5)
    return {
        "optimizer": sgd,
        "list": [sgd],
        "tuple of lists": ([sgd], [step]),
        "dict": {"optimizer": sgd, "lr_scheduler": step},
        "dict with config": {
            "optimizer": sgd,
            "lr_scheduler": {"scheduler": step, "interval": "step"},
        },
        "list of dicts": [{"optimizer": sgd, "lr_scheduler": {"scheduler": step, "frequency": 2}}],
    }


@pytest.mark.parametrize(
    ("form", "final_lr"),
    [
        ("optimizer", 0.1),
        ("list", 0.1),
        ("tuple of lists", 0.025),
        ("dict", 0.025),
        ("dict with config", 0.1 * 0.5**6),
        ("list of dicts", 0.05),
    ],
)
def test_every_configure_optimizers_form(make_trainer, form, final_lr):
    class Model(Regression):
        def configure_optimizers(self):
            return optimizer_forms(self)[form]

    trainer = make_trainer(max_epochs=2, limit_train_batches=3)
    trainer.fit(Model(), regression_loader())
    assert trainer.optimizers[0].param_groups[0]["lr"] == pytest.approx(final_lr)
    assert trainer.global_step == 6


@pytest.mark.parametrize("junk", [None, "adam", 3, [1, 2], {"lr_scheduler": None}])
def test_configure_optimizers_junk_names_what_came_back(make_trainer, junk):
    class Model(Regression):
        def configure_optimizers(self):
            return junk

    with pytest.raises(MisconfigurationError, match=r"configure_optimizers returned|keys"):
        make_trainer(max_steps=1).fit(Model(), regression_loader())


def test_reduce_on_plateau_needs_a_monitor(make_trainer):
    class Model(Regression):
        def configure_optimizers(self):
            opt = torch.optim.SGD(self.parameters(), lr=0.1)
            return {
                "optimizer": opt,
                "lr_scheduler": torch.optim.lr_scheduler.ReduceLROnPlateau(opt),
            }

    with pytest.raises(MisconfigurationError, match="monitor"):
        make_trainer(max_steps=1).fit(Model(), regression_loader())


def test_missing_training_step_is_a_clear_error(make_trainer):
    from trainkit import TrainModule

    class NoStep(TrainModule):
        def configure_optimizers(self):
            return None

    with pytest.raises(MisconfigurationError, match="defines no training_step"):
        make_trainer().fit(NoStep(), regression_loader())


def test_manual_optimization_with_two_optimizers(make_trainer):
    class Manual(Regression):
        def __init__(self):
            super().__init__()
            self.automatic_optimization = False

        def training_step(self, batch, batch_idx):
            first, second = self.optimizers()
            x, y = batch
            loss = F.mse_loss(self(x), y)
            first.zero_grad()
            self.manual_backward(loss)
            first.step()
            second.step()
            self.log("loss", loss)

        def configure_optimizers(self):
            return [
                torch.optim.SGD(self.parameters(), lr=0.1),
                torch.optim.SGD(self.parameters(), lr=0.0),
            ]

    model = Manual()
    before = model.layer.weight.detach().clone()
    trainer = make_trainer(max_epochs=1)
    trainer.fit(model, regression_loader())
    assert trainer.global_step == 16  # each optimizer step counts, as in Lightning
    assert not torch.equal(before, model.layer.weight)


def test_two_optimizers_in_automatic_mode_point_to_manual_optimization(make_trainer):
    class Two(Regression):
        def configure_optimizers(self):
            return [
                torch.optim.SGD(self.parameters(), lr=0.1),
                torch.optim.SGD(self.parameters(), lr=0.1),
            ]

    with pytest.raises(MisconfigurationError, match="automatic_optimization = False"):
        make_trainer(max_steps=1).fit(Two(), regression_loader())


def test_module_properties_follow_the_trainer(make_trainer):
    seen = {}

    class Probe(Regression):
        def on_train_epoch_end(self):
            seen.update(
                epoch=self.current_epoch,
                step=self.global_step,
                rank=self.global_rank,
                device=self.device,
                trainer=self.trainer,
            )

    trainer = make_trainer(max_epochs=2, limit_train_batches=2)
    trainer.fit(Probe(), regression_loader())
    assert seen == {
        "epoch": 1,
        "step": 4,
        "rank": 0,
        "device": torch.device("cpu"),
        "trainer": trainer,
    }


def test_save_hyperparameters_collects_init_arguments():
    class WithArgs(Regression):
        def __init__(self, lr: float = 0.05, width: int = 3, secret: str = "x"):
            super().__init__(lr=lr)
            self.save_hyperparameters(ignore="secret")

    model = WithArgs(lr=0.2, width=7)
    assert dict(model.hparams) == {"lr": 0.2, "width": 7}
    assert model.hparams.width == 7


def test_register_buffer_follows_the_module_and_type_as_works(make_trainer):
    class WithBuffer(Regression):
        def __init__(self):
            super().__init__()
            self.register_buffer("scale", torch.tensor(2.0))

        def training_step(self, batch, batch_idx):
            x, y = batch
            ones = torch.ones(1).type_as(x)
            assert self.scale.device == x.device == ones.device
            return F.mse_loss(self(x) * self.scale / 2 * ones, y)

    make_trainer(max_steps=2).fit(WithBuffer(), regression_loader())


class CountingData(DataModule):
    def __init__(self):
        super().__init__()
        self.prepared = 0
        self.stages: list[str] = []

    def prepare_data(self):
        self.prepared += 1

    def setup(self, stage):
        self.stages.append(stage)

    def train_dataloader(self):
        return regression_loader()

    def val_dataloader(self):
        return regression_loader(seed=1)

    def test_dataloader(self):
        return regression_loader(seed=2)


def test_datamodule_prepare_data_once_and_setup_per_stage(make_trainer):
    data = CountingData()
    model = Regression()
    trainer = make_trainer(max_epochs=1)
    trainer.fit(model, datamodule=data)
    result = trainer.test(model, datamodule=data, verbose=False)
    assert data.prepared == 2 and data.stages == ["fit", "test"]
    assert set(result[0]) == {"test_loss"}


def test_manual_optimization_with_the_config_optimizer_section(make_trainer):
    """A module without configure_optimizers gets one from the CLI's optimizer: section."""
    from trainkit import TrainModule
    from trainkit.cli.optimizers import ConfiguredOptimizers

    class ManualNoConfigure(TrainModule):
        def __init__(self):
            super().__init__()
            self.automatic_optimization = False
            self.layer = torch.nn.Linear(4, 1)

        def training_step(self, batch, batch_idx):
            optimizer = self.optimizers()
            x, y = batch
            optimizer.zero_grad()
            self.manual_backward(F.mse_loss(self.layer(x), y))
            optimizer.step()

    model = ManualNoConfigure()
    model.configure_optimizers = ConfiguredOptimizers(
        model, {"class_path": "torch.optim.SGD", "init_args": {"lr": 0.1}}, None
    )
    before = model.layer.weight.detach().clone()
    trainer = make_trainer(max_epochs=1)
    trainer.fit(model, regression_loader())
    assert isinstance(trainer.optimizers[0], torch.optim.SGD) and not torch.equal(
        before, model.layer.weight
    )
