"""While a run starts (the CLI importing and building its objects, the strategy wrapping the model
and the optimizers being made) Python's cycle collector passes rarely; the steps run on the
user's own schedule."""

from __future__ import annotations

import gc

import pytest

from tests.helpers.models import Regression, regression_loader
from trainkit.cli import LightningCLI
from trainkit.cycle_collector import STARTUP_THRESHOLDS, rare_collections

DEFAULT = (700, 10, 10)


@pytest.fixture(autouse=True)
def default_schedule():
    before = gc.get_threshold()
    gc.set_threshold(*DEFAULT)
    yield
    gc.set_threshold(*before)


class ScheduleRecorder(Regression):
    """Records the collector's thresholds where it is built, makes optimizers and steps."""

    def __init__(self, lr: float = 0.05) -> None:
        super().__init__(lr)
        self.seen = {"__init__": gc.get_threshold()}

    def configure_optimizers(self):
        self.seen["configure_optimizers"] = gc.get_threshold()
        return super().configure_optimizers()

    def training_step(self, batch, batch_idx):
        self.seen["training_step"] = gc.get_threshold()
        return super().training_step(batch, batch_idx)

    def train_dataloader(self):
        return regression_loader()


def test_the_block_collects_rarely_and_the_schedule_comes_back_even_after_an_error():
    with rare_collections():
        assert gc.get_threshold() == STARTUP_THRESHOLDS
    assert gc.get_threshold() == DEFAULT
    with pytest.raises(RuntimeError), rare_collections():
        raise RuntimeError("start-up failed")
    assert gc.get_threshold() == DEFAULT


@pytest.mark.parametrize("users", [(100_000, 5, 5), (0, 10, 10)], ids=["rarer", "off"])
def test_a_schedule_already_as_rare_or_switched_off_is_the_users_and_stays(users):
    gc.set_threshold(*users)
    with rare_collections():
        assert gc.get_threshold() == users
    assert gc.get_threshold() == users


def test_a_fit_makes_its_optimizers_collecting_rarely_and_steps_on_the_users_schedule(
    make_trainer,
):
    model = ScheduleRecorder()
    make_trainer(max_epochs=1).fit(model)
    assert model.seen["configure_optimizers"] == STARTUP_THRESHOLDS
    assert model.seen["training_step"] == DEFAULT
    assert gc.get_threshold() == DEFAULT


def test_the_cli_builds_the_model_collecting_rarely_and_trains_on_the_users_schedule(tmp_path):
    trainer = {"default_root_dir": str(tmp_path), "logger": False, "enable_progress_bar": False}
    cli = LightningCLI(
        ScheduleRecorder, trainer_defaults=trainer, args=["fit", "--trainer.max_epochs=1"]
    )
    assert cli.model.seen["__init__"] == STARTUP_THRESHOLDS
    assert cli.model.seen["training_step"] == DEFAULT
    assert gc.get_threshold() == DEFAULT
