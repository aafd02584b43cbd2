"""Lightning's Trainer arguments: None where Lightning takes None, min_steps, overfit_batches,
barebones, deterministic 'warn', benchmark, inference_mode, detect_anomaly, dataloader reloads."""

from __future__ import annotations

import pytest
import torch

from tests.helpers.models import Regression, regression_loader
from trainkit import Callback, Trainer
from trainkit.errors import ConfigError


def test_none_means_lightnings_default_for_every_argument_that_takes_it(make_trainer):
    trainer = make_trainer(
        min_epochs=None,
        min_steps=None,
        limit_train_batches=None,
        limit_val_batches=None,
        val_check_interval=None,
        num_sanity_val_steps=None,
        gradient_clip_algorithm=None,
        log_every_n_steps=None,
        enable_model_summary=None,
        deterministic=None,
        benchmark=None,
        max_epochs=1,
    )
    limits = trainer.run_state.limits
    assert (limits.min_epochs, limits.min_steps, limits.val_check_interval) == (0, -1, 1.0)
    assert (limits.num_sanity_val_steps, limits.log_every_n_steps) == (2, 50)
    assert limits.gradient_clip_algorithm == "norm"
    trainer.fit(Regression(), regression_loader())
    assert trainer.global_step == 8


class StopAtOnce(Callback):
    """Asks to stop after every training batch, like an impatient early stopping."""

    def on_train_batch_end(self, trainer, *args) -> None:
        trainer.should_stop = True


def test_min_steps_keeps_training_past_a_stop_request(make_trainer):
    trainer = make_trainer(max_epochs=5, min_steps=11, callbacks=[StopAtOnce()])
    trainer.fit(Regression(), regression_loader())
    assert trainer.global_step == 11  # 8 batches an epoch: stops in the second epoch


def test_min_epochs_keeps_training_past_a_stop_request(make_trainer):
    trainer = make_trainer(max_epochs=5, min_epochs=2, callbacks=[StopAtOnce()])
    trainer.fit(Regression(), regression_loader())
    assert trainer.current_epoch == 2 and trainer.global_step == 16


class Batches(Regression):
    """Records the first feature of every batch it trains and validates on."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: dict[str, list[float]] = {"train": [], "val": []}

    def training_step(self, batch, batch_idx):
        self.seen["train"].append(batch[0][0, 0].item())
        return super().training_step(batch, batch_idx)

    def validation_step(self, batch, batch_idx):
        self.seen["val"].append(batch[0][0, 0].item())
        return super().validation_step(batch, batch_idx)


def test_overfit_batches_trains_and_validates_on_the_same_unshuffled_first_batches(make_trainer):
    model = Batches()
    loader = regression_loader(shuffle=True)
    make_trainer(max_epochs=2, overfit_batches=3).fit(model, loader, regression_loader())
    in_order = [x[0, 0].item() for x, _ in regression_loader()][:3]
    assert model.seen["train"] == in_order * 2
    assert len(model.seen["val"]) == 6


def test_overfit_batches_out_of_range_is_refused():
    with pytest.raises(ConfigError, match=r"overfit_batches.*1\.5.*a float in \[0, 1\]"):
        Trainer(overfit_batches=1.5)


def test_validation_counted_across_epochs_when_check_val_every_n_epoch_is_none(make_trainer):
    model = Batches()
    trainer = make_trainer(max_epochs=3, check_val_every_n_epoch=None, val_check_interval=12)
    trainer.fit(model, regression_loader(), regression_loader(n=16))
    assert len(model.seen["val"]) == 2 * 2  # after batches 12 and 24 of 24, two val batches each


def test_check_val_every_n_epoch_none_needs_an_int_interval():
    with pytest.raises(ConfigError, match=r"an int .* when check_val_every_n_epoch is None"):
        Trainer(check_val_every_n_epoch=None, val_check_interval=0.5)


def test_barebones_writes_nothing_and_refuses_an_extra_turned_on(tmp_path, capsys):
    trainer = Trainer(barebones=True, max_epochs=1, default_root_dir=str(tmp_path))
    trainer.fit(Regression(), regression_loader())
    assert trainer.loggers == [] and trainer.checkpoint_callback is None
    assert list(tmp_path.iterdir()) == []
    said = capsys.readouterr().out  # what it trained with and how it ended, still said
    assert "training configuration" in said and "fit done in" in said
    with pytest.raises(ConfigError, match=r"enable_checkpointing.*barebones"):
        Trainer(barebones=True, enable_checkpointing=True)


def test_deterministic_warn_only_and_benchmark_set_torch_switches():
    previous = torch.backends.cudnn.benchmark
    try:
        Trainer(deterministic="warn", benchmark=True)
        assert torch.are_deterministic_algorithms_enabled()
        assert torch.is_deterministic_algorithms_warn_only_enabled()
        assert torch.backends.cudnn.benchmark is True
    finally:
        torch.use_deterministic_algorithms(False)
        torch.backends.cudnn.benchmark = previous
    with pytest.raises(ConfigError, match=r"deterministic.*'sometimes'.*'warn'"):
        Trainer(deterministic="sometimes")


class GradMode(Regression):
    """Records whether evaluation ran under inference mode."""

    modes: list[bool]

    def validation_step(self, batch, batch_idx):
        self.modes.append(torch.is_inference_mode_enabled())


@pytest.mark.parametrize("inference_mode", [True, False])
def test_inference_mode_chooses_how_evaluation_turns_gradients_off(make_trainer, inference_mode):
    model = GradMode()
    model.modes = []
    make_trainer(inference_mode=inference_mode).validate(model, regression_loader(n=16))
    assert model.modes == [inference_mode] * 2


class NaNInBackward(Regression):
    def training_step(self, batch, batch_idx):
        x, y = batch
        return (self(x) - y).sqrt().sum() * 0.0 + torch.tensor(-1.0, requires_grad=True).sqrt()


@pytest.mark.filterwarnings("ignore:Error detected in SqrtBackward0")
def test_detect_anomaly_names_the_operation_that_made_a_nan(make_trainer):
    with pytest.raises(RuntimeError, match=r"SqrtBackward0.*returned nan"):
        make_trainer(max_steps=1, detect_anomaly=True).fit(NaNInBackward(), regression_loader())


class Reloading(Regression):
    """Hands out a new train loader each time it is asked, with a size telling which call."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0
        self.sizes: list[int] = []

    def train_dataloader(self):
        self.calls += 1
        return regression_loader(n=8 * self.calls)

    def on_train_epoch_start(self) -> None:
        self.sizes.append(len(self.trainer.train_dataloader.dataset))


def test_reload_dataloaders_every_n_epochs_asks_the_module_again(make_trainer):
    model = Reloading()
    make_trainer(max_epochs=4, reload_dataloaders_every_n_epochs=2).fit(model)
    assert model.sizes == [8, 8, 16, 16]


def test_max_time_stops_training_with_a_timer(make_trainer):
    from trainkit.callbacks import Timer

    trainer = make_trainer(max_epochs=1000, max_time={"seconds": 0})
    trainer.fit(Regression(), regression_loader())
    assert any(isinstance(cb, Timer) for cb in trainer.callbacks)
    assert trainer.global_step <= 1  # stopped as soon as the duration was past


def test_enable_model_summary_prints_the_layer_table(make_trainer, capsys):
    make_trainer(max_steps=1, enable_model_summary=True).fit(Regression(), regression_loader())
    out = capsys.readouterr().out
    assert "layer" in out and "Linear" in out and "Trainable params" in out
