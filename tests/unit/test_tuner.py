"""Lightning's Tuner (``trainkit.tuner.Tuner``) and its callbacks (``LearningRateFinder``,
``BatchSizeFinder``): the LR range test and its suggestion, the batch-size search against a model
that runs out of memory above a size, the stage put back exactly as it was (the same program
under Lightning reaching the same rates and sizes: tests/integration/compat/test_tuner_program.py)."""

from __future__ import annotations

import inspect
import sys
import warnings

import pytest
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

from tests.helpers.models import regression_data
from trainkit import DataModule, TrainModule, seed_everything
from trainkit.callbacks import BatchSizeFinder, LearningRateFinder
from trainkit.errors import MisconfigurationError
from trainkit.tuner import LRFinder, Tuner
from trainkit.tuner.batch_size_scaling import is_out_of_memory

OUT_OF_MEMORY = "DefaultCPUAllocator: can't allocate memory: you tried to allocate 8589934592 bytes"


class Tunable(TrainModule):
    """A regression with a noisy path (dropout, a shuffled loader) and Adam; a batch over
    ``memory_limit`` samples raises the error a CPU allocator raises when memory runs out."""

    def __init__(self, lr: float = 0.01, batch_size: int = 32, memory_limit: int = 0) -> None:
        super().__init__()
        self.lr = lr
        self.batch_size = batch_size
        self.memory_limit = memory_limit
        self.net = nn.Sequential(nn.Linear(4, 16), nn.Dropout(0.2), nn.Linear(16, 1))
        self.batch_sizes: list[int] = []  # of every step run, trial or not

    def check_memory(self, x: torch.Tensor) -> None:
        self.batch_sizes.append(len(x))
        if self.memory_limit and len(x) > self.memory_limit:
            raise RuntimeError(OUT_OF_MEMORY)

    def training_step(self, batch, batch_idx):
        x, y = batch
        self.check_memory(x)
        return F.mse_loss(self.net(x), y)

    def validation_step(self, batch, batch_idx):
        self.check_memory(batch[0])

    def test_step(self, batch, batch_idx):
        self.check_memory(batch[0])

    def predict_step(self, batch, batch_idx):
        self.check_memory(batch[0])
        return self.net(batch[0])

    def train_dataloader(self):
        return DataLoader(regression_data(128), batch_size=self.batch_size, shuffle=True)

    def val_dataloader(self):
        return DataLoader(regression_data(64, seed=1), batch_size=self.batch_size)

    def test_dataloader(self):
        return self.val_dataloader()

    def predict_dataloader(self):
        return self.val_dataloader()

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.lr)


class SizedData(DataModule):
    """A datamodule whose batch size is a hyperparameter."""

    def __init__(self, batch_size: int = 4) -> None:
        super().__init__()
        self.save_hyperparameters()

    def train_dataloader(self):
        return DataLoader(regression_data(128), batch_size=self.hparams.batch_size)


class HparamsRate(Tunable):
    """Its rate is a hyperparameter (``self.hparams.learning_rate``), not an attribute."""

    def __init__(self, learning_rate: float = 0.01) -> None:
        super().__init__()
        del self.lr
        self.save_hyperparameters()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.hparams.learning_rate)


def weights(model: nn.Module) -> list[torch.Tensor]:
    return [p.detach().clone() for p in model.parameters()]


def same(first: list[torch.Tensor], second: list[torch.Tensor]) -> bool:
    return all(torch.equal(a, b) for a, b in zip(first, second, strict=True))


@pytest.fixture(autouse=True)
def seeded():
    """Each test starts from the same random state, whatever ran before it."""
    seed_everything(0)


# ---- the LR range test ------------------------------------------------------------------------
def test_lr_find_tries_exponentially_rising_rates_and_writes_the_suggestion(make_trainer):
    model = Tunable()
    trainer = make_trainer(max_epochs=5)
    finder = Tuner(trainer).lr_find(model, min_lr=1e-4, max_lr=1.0, num_training=30)
    assert isinstance(finder, LRFinder)
    lrs, losses = finder.results["lr"], finder.results["loss"]
    assert len(lrs) == len(losses) and 10 < len(lrs) <= 30
    # step k > 0 sits at (k + 1) / 30 of the way from 1e-4 to 1.0 on a log scale
    assert lrs[0] == pytest.approx(1e-4)
    assert lrs[5] == pytest.approx(1e-4 * (1.0 / 1e-4) ** (6 / 30))
    suggestion = finder.suggestion()
    assert suggestion in lrs[10:-1] and model.lr == suggestion
    assert trainer.callbacks == []  # the finder was only there for the search


def test_a_linear_test_raises_the_rate_by_equal_steps(make_trainer):
    finder = Tuner(make_trainer(max_epochs=5)).lr_find(
        Tunable(), min_lr=0.001, max_lr=0.01, num_training=20, mode="linear", update_attr=False
    )
    assert finder is not None
    steps = [b - a for a, b in zip(finder.results["lr"][1:], finder.results["lr"][2:])]
    assert steps == pytest.approx([0.009 / 20] * len(steps))


def test_a_diverging_loss_stops_the_test_early(make_trainer, capsys):
    finder = Tuner(make_trainer(max_epochs=20)).lr_find(
        Tunable(), min_lr=1e-3, max_lr=1e6, num_training=100, update_attr=False
    )
    assert finder is not None
    stopped = len(finder.results["loss"])
    assert stopped < 100
    assert (
        f"LR finder stopped early after {stopped} steps due to diverging loss."
        in capsys.readouterr().out
    )
    # the last smoothed loss passed 4 times the best one before it
    assert finder.results["loss"][-1] > 4 * min(finder.results["loss"][:-1])


def test_the_rate_is_found_in_the_hparams_or_under_a_given_name(make_trainer):
    model = HparamsRate()
    Tuner(make_trainer(max_epochs=5)).lr_find(model, num_training=20, min_lr=1e-4)
    assert model.hparams.learning_rate != 0.01
    model = Tunable()
    model.step_size = 0.5
    finder = Tuner(make_trainer(max_epochs=5)).lr_find(
        model, num_training=20, min_lr=1e-4, attr_name="step_size"
    )
    assert finder is not None and model.step_size == finder.suggestion() and model.lr == 0.01


def test_a_model_without_a_rate_attribute_is_told_how_to_name_it(make_trainer):
    class FixedRate(Tunable):
        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

    model = FixedRate()
    del model.lr
    with pytest.raises(AttributeError, match=r"\('lr', 'learning_rate'\).*attr_name"):
        Tuner(make_trainer()).lr_find(model)
    with pytest.raises(AttributeError, match="set to rate"):
        Tuner(make_trainer()).lr_find(model, attr_name="rate")


def test_the_suggestion_is_the_steepest_descent_between_the_skipped_ends():
    finder = LRFinder("linear", 1.0, 8.0, 8)
    finder.results = {
        "lr": [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0],
        "loss": [9.0, 0.0, 5.0, float("nan"), 4.8, 1.0, 0.95, 50.0],
    }
    # the fall from 4.8 to 1.0 is the steepest once the first two steps and the last are
    # skipped; the nan is left out
    assert finder.suggestion(skip_begin=2, skip_end=1) == 5.0
    assert finder.suggestion(skip_begin=0, skip_end=1) == 1.0  # the fall from 9.0 counts
    assert finder.suggestion(skip_begin=6, skip_end=1) is None  # one point: no slope


def test_the_plot_is_a_matplotlib_figure_with_the_suggestion_marked(make_trainer):
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    finder = Tuner(make_trainer(max_epochs=5)).lr_find(Tunable(), num_training=30, min_lr=1e-4)
    assert finder is not None
    figure = finder.plot(suggest=True)
    assert isinstance(figure, matplotlib.figure.Figure)
    (axes,) = figure.axes
    curve, marker = axes.lines
    assert list(curve.get_xdata()) == finder.results["lr"]
    assert list(marker.get_xdata()) == [finder.suggestion()] and marker.get_color() == "red"
    assert axes.get_xscale() == "log"
    _, ax = plt.subplots()
    assert finder.plot(ax=ax) is ax.figure and len(ax.lines) == 1
    plt.close("all")


def test_the_plot_says_how_to_install_matplotlib(monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", None)  # import fails as if absent
    finder = LRFinder("exponential", 1e-3, 1.0, 2)
    finder.results = {"lr": [1e-3, 1.0], "loss": [1.0, 0.5]}
    with pytest.raises(MisconfigurationError, match="pip install matplotlib"):
        finder.plot()


# ---- the batch-size search --------------------------------------------------------------------
@pytest.mark.parametrize(
    ("mode", "found", "tried"),
    [
        # doubled until 64 ran out of memory, then halved
        ("power", 32, [2, 4, 8, 16, 32, 64]),
        # then bisected between 32 (fitted) and 64 (did not): 48, 40 (fits), 44, 42, 41
        ("binsearch", 40, [2, 4, 8, 16, 32, 64, 48, 40, 44, 42, 41]),
    ],
)
def test_the_largest_batch_that_fits_is_written_to_the_model(make_trainer, mode, found, tried):
    model = Tunable(memory_limit=40)
    size = Tuner(make_trainer(max_epochs=1)).scale_batch_size(
        model, mode=mode, steps_per_trial=1, margin=0.0
    )
    assert size == model.batch_size == found
    assert model.batch_sizes == tried


def test_binsearch_keeps_a_margin_and_the_search_stops_at_max_trials_and_max_val(make_trainer):
    model = Tunable(memory_limit=40)
    tuner = Tuner(make_trainer(max_epochs=1))
    assert tuner.scale_batch_size(model, mode="binsearch", steps_per_trial=1) == 38  # 40 - 5%
    assert model.batch_size == 38
    model = Tunable()
    assert tuner.scale_batch_size(model, steps_per_trial=1, init_val=3, max_trials=3) == 12
    assert model.batch_sizes == [3, 6, 12] and model.batch_size == 12
    model = Tunable()
    assert tuner.scale_batch_size(model, steps_per_trial=1, max_val=16) == 16
    assert model.batch_sizes == [2, 4, 8]  # 16 is the limit: not tried


def test_the_size_is_found_in_the_datamodules_hparams(make_trainer):
    class FromData(Tunable):
        def train_dataloader(self):
            raise AssertionError("the datamodule's loader is used")

    data = SizedData()
    model = FromData(memory_limit=20)
    del model.batch_size
    size = Tuner(make_trainer(max_epochs=1)).scale_batch_size(
        model, datamodule=data, steps_per_trial=1
    )
    assert size == data.hparams.batch_size == 16


@pytest.mark.parametrize("method", ["validate", "test", "predict"])
def test_the_search_runs_the_stage_given_as_method(make_trainer, method):
    model = Tunable(memory_limit=24)
    size = Tuner(make_trainer()).scale_batch_size(
        model, method=method, mode="binsearch", steps_per_trial=1, margin=0.0
    )
    assert size == model.batch_size == 24


def test_a_batch_size_finder_in_a_test_run_tests_at_the_size_found(make_trainer):
    model = Tunable(memory_limit=20)
    finder = BatchSizeFinder(steps_per_trial=1)
    make_trainer(callbacks=[finder]).test(model)
    assert finder.optimal_batch_size == model.batch_size == 16
    # after the trials (2 ... 32), the test itself: 64 samples in batches of 16
    assert model.batch_sizes[-4:] == [16, 16, 16, 16]


def test_loaders_given_to_fit_cannot_be_resized(make_trainer):
    loader = DataLoader(regression_data(32), batch_size=4)
    with pytest.raises(MisconfigurationError, match=r"passed directly to `\.fit\(\)`"):
        Tuner(make_trainer()).scale_batch_size(Tunable(), train_dataloaders=loader)


def test_an_error_other_than_out_of_memory_ends_the_search_and_restores_the_weights(
    make_trainer, tmp_path
):
    class Broken(Tunable):
        def training_step(self, batch, batch_idx):
            if len(batch[0]) > 4:
                raise RuntimeError("shape mismatch")
            return super().training_step(batch, batch_idx)

    model = Broken()
    before = weights(model)
    with pytest.raises(RuntimeError, match="shape mismatch"):
        Tuner(make_trainer(max_epochs=1)).scale_batch_size(model, steps_per_trial=2)
    assert same(before, weights(model))
    assert not list(tmp_path.glob(".*.ckpt"))


def test_out_of_memory_errors_are_recognised_by_their_text():
    assert is_out_of_memory(RuntimeError(OUT_OF_MEMORY))
    assert is_out_of_memory(RuntimeError("CUDA out of memory. Tried to allocate 20.00 MiB"))
    assert is_out_of_memory(torch.OutOfMemoryError("anything"))
    assert not is_out_of_memory(RuntimeError("mat1 and mat2 shapes cannot be multiplied"))
    assert not is_out_of_memory(ValueError("out of memory"))


# ---- the stage put back as it was -------------------------------------------------------------
def test_a_fit_after_tuning_trains_as_a_fit_without_it(make_trainer, tmp_path):
    """Dropout, a shuffled loader and Adam: the searches' steps, RNG draws and optimizer state
    leave no trace, so a fit with the rate and size found equals a fit told them directly."""
    seed_everything(3)
    tuned = Tunable(batch_size=8, memory_limit=40)  # 16 batches an epoch
    trainer = make_trainer(max_epochs=2)
    tuner = Tuner(trainer)
    start = weights(tuned)
    tuner.lr_find(tuned, min_lr=1e-4, num_training=20, early_stop_threshold=None)
    tuner.scale_batch_size(tuned, steps_per_trial=2)
    assert same(start, weights(tuned))
    assert tuned.lr != 0.01 and tuned.batch_size == 32
    trainer.fit(tuned)
    seed_everything(3)
    plain = Tunable(lr=tuned.lr, batch_size=tuned.batch_size)
    make_trainer(max_epochs=2).fit(plain)
    assert same(weights(tuned), weights(plain))
    assert not list(tmp_path.glob(".*.ckpt"))


def test_the_callbacks_search_then_fit_as_a_fit_without_them(make_trainer):
    seed_everything(5)
    searched = Tunable(batch_size=8, memory_limit=40)
    finder = LearningRateFinder(min_lr=1e-4, num_training_steps=20, early_stop_threshold=None)
    callbacks = [finder, BatchSizeFinder()]
    make_trainer(max_epochs=2, callbacks=callbacks).fit(searched)
    assert callbacks[0].optimal_lr is not None and callbacks[1].optimal_batch_size == 32
    seed_everything(5)
    plain = Tunable(lr=searched.lr, batch_size=32)
    make_trainer(max_epochs=2).fit(plain)
    assert searched.lr == callbacks[0].optimal_lr.suggestion()
    assert same(weights(searched), weights(plain))


def test_a_search_from_a_later_epoch_leaves_the_running_fit_where_it_was(make_trainer):
    class AtEpochOne(LearningRateFinder):
        def on_fit_start(self, trainer, pl_module):
            return

        def on_train_epoch_start(self, trainer, pl_module):
            if trainer.current_epoch == 1:
                self.lr_find(trainer, pl_module)

    finder = AtEpochOne(min_lr=1e-4, num_training_steps=20, early_stop_threshold=None)
    model = Tunable(batch_size=8)  # 16 batches an epoch
    trainer = make_trainer(max_epochs=3, callbacks=[finder])
    trainer.fit(model)
    assert finder.optimal_lr is not None and len(finder.optimal_lr.results["lr"]) == 20
    assert model.lr == finder.optimal_lr.suggestion()
    # every epoch ran its 16 steps once: the search's 20 steps are not counted
    assert (trainer.current_epoch, trainer.global_step) == (3, 48)
    # steps: 48 of the fit, 20 of the search (without validation), 3 validations of 8 batches
    assert len(model.batch_sizes) == 48 + 20 + 3 * 8


# ---- arguments, as Lightning checks them ------------------------------------------------------
def test_the_tuner_checks_its_arguments_as_lightning_does(make_trainer):
    tuner = Tuner(make_trainer())
    with pytest.raises(MisconfigurationError, match="method='fit' is the only valid"):
        tuner.lr_find(Tunable(), method="test")
    with pytest.raises(ValueError, match="method 'tune' is invalid"):
        tuner.scale_batch_size(Tunable(), method="tune")  # type: ignore[arg-type]
    loader = DataLoader(TensorDataset(torch.zeros(4, 4)), batch_size=2)
    with pytest.raises(MisconfigurationError, match="`dataloaders` argument should be None"):
        tuner.scale_batch_size(Tunable(), dataloaders=loader)
    with pytest.raises(MisconfigurationError, match="should be None, please consider"):
        tuner.scale_batch_size(Tunable(), method="test", train_dataloaders=loader)
    with pytest.raises(ValueError, match="mode 'cosine'; expected one of \\('linear', 'expo"):
        LearningRateFinder(mode="cosine")
    with pytest.raises(ValueError, match="one of \\('power', 'binsearch'\\)"):
        BatchSizeFinder(mode="double")
    with pytest.raises(MisconfigurationError, match=r"margin 1\.5"):
        BatchSizeFinder(margin=1.5)
    with pytest.raises(ValueError, match="already configured with a `LearningRateFinder`"):
        Tuner(make_trainer(callbacks=[LearningRateFinder()])).lr_find(Tunable())
    with pytest.raises(MisconfigurationError, match="Field size not found"):
        tuner.scale_batch_size(Tunable(), batch_arg_name="size")


def test_under_fast_dev_run_nothing_is_tuned(make_trainer):
    model = Tunable()
    tuner = Tuner(make_trainer(fast_dev_run=True))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert tuner.lr_find(model) is None
        assert tuner.scale_batch_size(model) is None
    said = [str(w.message) for w in caught]
    assert "Skipping learning rate finder since `fast_dev_run` is enabled." in said
    assert "Skipping batch size scaler since `fast_dev_run` is enabled." in said
    assert (model.lr, model.batch_size) == (0.01, 32)


# ---- from a config, and under Lightning -------------------------------------------------------
CALLBACKS = """
trainer:
  max_epochs: 1
  enable_progress_bar: false
  logger: false
  callbacks:
    - class_path: trainkit.callbacks.LearningRateFinder
      init_args: {min_lr: 1.0e-5, num_training_steps: 20}
    - class_path: BatchSizeFinder
      init_args: {max_trials: 3, steps_per_trial: 1}
"""


def test_the_callbacks_work_from_a_config(run_main, autoencoder_config, tmp_path):
    config = tmp_path / "tune.yaml"
    config.write_text(CALLBACKS)
    done = run_main(
        "fit", "-c", autoencoder_config, "-c", str(config), "--data.init_args.num_samples", "2048",
        "--trainer.default_root_dir", str(tmp_path),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (said,) = [line for line in done.stdout.splitlines() if line.startswith("Learning rate set")]
    rate = float(said.rsplit(" ", 1)[1])
    assert (
        "Finished batch size finder, will continue with full run using batch size 8" in done.stdout
    )
    (last,) = tmp_path.rglob("last.ckpt")
    saved = torch.load(last, weights_only=True)
    assert saved["hyper_parameters"]["lr"] == rate
    assert saved["datamodule_hyper_parameters"]["batch_size"] == 8
    assert not list(tmp_path.rglob(".*.ckpt"))


lightning_installed = pytest.mark.skipif(
    __import__("importlib").util.find_spec("lightning") is None,
    reason="Lightning is not installed (pip install 'lightning==2.6.*' to compare with it)",
)


def test_the_callback_rows_of_the_compat_page_list_the_signatures():
    from tests.unit.test_compat_doc import documented_arguments

    for callback in (LearningRateFinder, BatchSizeFinder):
        signature = [p for p in inspect.signature(callback.__init__).parameters if p != "self"]
        assert documented_arguments(callback.__name__) == signature


@lightning_installed
@pytest.mark.lightning
def test_the_signatures_are_lightnings():
    from lightning.pytorch import callbacks
    from lightning.pytorch.tuner import Tuner as LightningTuner
    from lightning.pytorch.tuner.lr_finder import _LRFinder

    def parameters(function):
        return [
            (p.name, p.default, p.kind) for p in inspect.signature(function).parameters.values()
        ]

    pairs = [
        (Tuner.lr_find, LightningTuner.lr_find),
        (Tuner.scale_batch_size, LightningTuner.scale_batch_size),
        (LearningRateFinder.__init__, callbacks.LearningRateFinder.__init__),
        (LearningRateFinder.lr_find, callbacks.LearningRateFinder.lr_find),
        (BatchSizeFinder.__init__, callbacks.BatchSizeFinder.__init__),
        (BatchSizeFinder.scale_batch_size, callbacks.BatchSizeFinder.scale_batch_size),
        (LRFinder.__init__, _LRFinder.__init__),
        (LRFinder.suggestion, _LRFinder.suggestion),
        (LRFinder.plot, _LRFinder.plot),
    ]
    for ours, theirs in pairs:
        assert parameters(ours) == parameters(theirs), ours.__qualname__
