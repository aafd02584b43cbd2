"""Trainer arguments: accumulation, clipping, step/batch limits, fast_dev_run, precision, errors."""

from __future__ import annotations

import copy

import pytest
import torch

from tests.helpers.models import Regression, regression_loader
from trainkit import Trainer
from trainkit.errors import ConfigError


def final_weights(make_trainer, loader, **kwargs):
    torch.manual_seed(0)
    model = Regression(lr=0.1)
    make_trainer(**kwargs).fit(model, loader)
    return model.layer.weight.detach().clone(), model.layer.bias.detach().clone()


def test_accumulating_two_batches_of_8_equals_one_batch_of_16(make_trainer):
    accumulated = final_weights(
        make_trainer, regression_loader(batch_size=8), max_epochs=2, accumulate_grad_batches=2
    )
    large = final_weights(make_trainer, regression_loader(batch_size=16), max_epochs=2)
    for a, b in zip(accumulated, large):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    ("algorithm", "check"),
    [
        ("norm", lambda delta: pytest.approx(0.01, rel=1e-4) == delta.norm().item()),
        ("value", lambda delta: delta.abs().max().item() <= 0.01 + 1e-7),
    ],
)
def test_gradient_clipping_bounds_the_update(make_trainer, algorithm, check):
    class Big(Regression):
        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=1.0)

    model = Big()
    before = torch.cat([p.detach().flatten().clone() for p in model.parameters()])
    make_trainer(max_steps=1, gradient_clip_val=0.01, gradient_clip_algorithm=algorithm).fit(
        model, regression_loader()
    )
    after = torch.cat([p.detach().flatten() for p in model.parameters()])
    assert check(after - before)


def test_max_steps_stops_mid_epoch(make_trainer):
    """As under Lightning, the epoch max_steps cut short counts in current_epoch."""
    trainer = make_trainer(max_steps=5, max_epochs=10)
    trainer.fit(Regression(), regression_loader())
    assert trainer.global_step == 5 and trainer.current_epoch == 1


def test_limits_cap_batches_per_epoch_and_validation(make_trainer):
    counts = {"val": 0}

    class Counting(Regression):
        def validation_step(self, batch, batch_idx):
            counts["val"] += 1

    trainer = make_trainer(max_epochs=3, limit_train_batches=0.25, limit_val_batches=2)
    trainer.fit(Counting(), regression_loader(), regression_loader())
    assert trainer.global_step == 3 * 2 and counts["val"] == 3 * 2


def test_val_check_interval_validates_inside_the_epoch(make_trainer):
    counts = {"val_runs": 0}

    class Counting(Regression):
        def on_validation_epoch_end(self):
            counts["val_runs"] += 1

    make_trainer(max_epochs=1, val_check_interval=0.5, limit_val_batches=1).fit(
        Counting(), regression_loader(), regression_loader()
    )
    assert counts["val_runs"] == 2


def test_fast_dev_run_runs_one_batch_and_writes_nothing(tmp_path):
    trainer = Trainer(
        accelerator="cpu",
        fast_dev_run=True,
        default_root_dir=str(tmp_path),
        enable_progress_bar=False,
    )
    trainer.fit(Regression(), regression_loader(), regression_loader())
    assert trainer.global_step == 1
    assert list(tmp_path.iterdir()) == []


def test_bf16_mixed_trains_on_cpu(make_trainer):
    model = Regression(lr=0.05)
    dtypes = []

    class Probe(Regression):
        def training_step(self, batch, batch_idx):
            dtypes.append(self(batch[0]).dtype)
            return super().training_step(batch, batch_idx)

    model = Probe(lr=0.05)
    trainer = make_trainer(max_epochs=5, precision="bf16-mixed")
    trainer.fit(model, regression_loader())
    assert dtypes[0] == torch.bfloat16
    assert trainer.callback_metrics["train_loss"].item() < 1.0
    assert model.layer.weight.dtype == torch.float32


@pytest.mark.parametrize(
    ("kwargs", "named"),
    [
        ({"precision": "64"}, "'64'"),
        ({"precision": "16-mixed"}, "bf16-mixed"),
        ({"accelerator": "tpu"}, "'tpu'"),
        ({"strategy": "horovodd"}, "'horovodd'.*did you mean 'horovod'"),
        ({"accumulate_grad_batches": 0}, "accumulate_grad_batches"),
        ({"gradient_clip_algorithm": "l1"}, "'l1'"),
        ({"val_check_interval": 1.5}, "1.5"),
        ({"num_nodes": 0}, "num_nodes"),
        ({"profiler": "fancy"}, "'fancy'"),
        ({"logger": "yes"}, "'yes'"),
    ],
)
def test_bad_arguments_raise_one_clear_line(kwargs, named):
    with pytest.raises(ConfigError, match=named) as info:
        Trainer(accelerator=kwargs.pop("accelerator", "cpu"), **kwargs)
    assert "\n" not in str(info.value) and "expected" in str(info.value)


def test_profiler_simple_prints_a_table(make_trainer, capsys):
    make_trainer(max_steps=3, profiler="simple").fit(Regression(), regression_loader())
    out = capsys.readouterr().out
    assert "training_step" in out and "mean (ms)" in out


def test_fit_then_test_in_one_script_uses_the_trained_weights(make_trainer):
    model = Regression(lr=0.1)
    trainer = make_trainer(max_epochs=10)
    untrained = trainer.test(copy.deepcopy(model), regression_loader(), verbose=False)[0][
        "test_loss"
    ]
    trainer.fit(model, regression_loader())
    trained = trainer.test(dataloaders=regression_loader(), verbose=False)[0]["test_loss"]
    assert trained < untrained / 10
