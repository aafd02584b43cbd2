"""The Trainer members Lightning programs read and set: ``trainer.state`` and the stage flags,
``ckpt_path``, the callback finders, the stages' loaders and batch counts, ``logged_metrics``,
the setters of ``optimizers``/``logger``/``loggers``, ``predict(return_predictions=False)``,
``save_checkpoint(storage_options=...)`` and ``print``. (Their signatures against Lightning's:
tests/unit/test_lightning_signatures.py.)"""

from __future__ import annotations

import pytest
import torch

from tests.helpers.models import Regression, regression_loader
from trainkit import CSVLogger
from trainkit.callbacks import EarlyStopping, ModelCheckpoint, OnExceptionCheckpoint
from trainkit.callbacks.progress import ProgressBar
from trainkit.trainer.states import RunningStage, TrainerFn, TrainerState, TrainerStatus


def test_a_new_trainer_is_initializing_and_a_finished_stage_says_so(make_trainer):
    trainer = make_trainer(max_steps=2)
    assert trainer.state == TrainerState() and trainer.state is trainer.run_state.trainer_state
    assert (trainer.state.status, trainer.state.fn, trainer.state.stage) == (
        TrainerStatus.INITIALIZING,
        None,
        None,
    )
    trainer.fit(Regression(), regression_loader())
    assert trainer.state.fn == TrainerFn.FITTING == "fit"
    assert trainer.state.finished and trainer.state.stopped and trainer.state.stage is None
    assert not trainer.interrupted


def test_a_failed_stage_is_interrupted(make_trainer):
    class Fails(Regression):
        def training_step(self, batch, batch_idx):
            raise ValueError("on purpose")

    trainer = make_trainer(max_steps=2)
    with pytest.raises(ValueError, match="on purpose"):
        trainer.fit(Fails(), regression_loader())
    assert trainer.interrupted and trainer.state.status == "interrupted"
    assert trainer.state.stopped and not trainer.state.finished


def test_the_stage_flags_follow_the_loops_and_can_be_set_like_lightnings(make_trainer):
    seen = []

    class Watches(Regression):
        def on_train_batch_start(self, batch, batch_idx):
            seen.append(("train", self.trainer.training, self.trainer.evaluating))

        def validation_step(self, batch, batch_idx):
            seen.append(("val", self.trainer.validating, self.trainer.evaluating))

    trainer = make_trainer(max_epochs=1, limit_train_batches=1, limit_val_batches=1)
    trainer.fit(Watches(), regression_loader(), regression_loader(n=8))
    assert seen == [("train", True, False), ("val", True, True)]
    trainer.testing = True
    assert trainer.state.stage == RunningStage.TESTING and trainer.evaluating
    trainer.training = False  # not the stage running: nothing changes
    assert trainer.testing
    trainer.testing = False
    assert trainer.state.stage is None
    trainer.state.stage = "sanity_check"
    assert trainer.sanity_checking and RunningStage.SANITY_CHECKING.dataloader_prefix == "val"


def test_ckpt_path_is_the_loaded_checkpoint_and_a_set_one_serves_later_stages(
    make_trainer, tmp_path
):
    model = Regression()
    fitted = make_trainer(max_steps=2)
    fitted.fit(model, regression_loader())
    path = str(tmp_path / "two.ckpt")
    fitted.save_checkpoint(path)
    assert fitted.ckpt_path is None  # fit started from scratch

    trainer = make_trainer()
    trainer.ckpt_path = path
    fresh = Regression()
    trainer.validate(fresh, regression_loader(n=8), verbose=False)
    assert trainer.ckpt_path == path
    assert torch.equal(fresh.layer.weight, model.layer.weight)  # the set checkpoint was loaded
    trainer.ckpt_path = None
    other = Regression(features=4)
    trainer.validate(other, regression_loader(n=8), verbose=False)
    assert trainer.ckpt_path is None and not torch.equal(other.layer.weight, model.layer.weight)


def test_the_callback_finders(make_trainer, tmp_path):
    stopping = EarlyStopping(monitor="val_loss")
    saving = ModelCheckpoint(dirpath=tmp_path)
    on_error = OnExceptionCheckpoint(dirpath=str(tmp_path))
    trainer = make_trainer(callbacks=[stopping, saving, on_error], enable_progress_bar=True)
    assert trainer.early_stopping_callback is stopping
    assert trainer.early_stopping_callbacks == [stopping]
    assert trainer.checkpoint_callback is saving
    assert sorted(map(id, trainer.checkpoint_callbacks)) == sorted(map(id, [saving, on_error]))
    assert isinstance(trainer.progress_bar_callback, ProgressBar)
    assert make_trainer().progress_bar_callback is None


class SeveralLoaders(Regression):
    def test_step(self, batch, batch_idx, dataloader_idx=0):
        super().test_step(batch, batch_idx)


def test_the_stages_loaders_and_their_batch_counts(make_trainer):
    model = SeveralLoaders()
    trainer = make_trainer(max_epochs=1, limit_val_batches=3, num_sanity_val_steps=2)
    assert not trainer.enable_validation  # no module yet
    trainer.fit(model, regression_loader(), regression_loader(n=40))  # 5 batches
    assert trainer.enable_validation
    assert trainer.num_val_batches == [3] and trainer.num_sanity_val_batches == [2]
    both = [regression_loader(n=16), regression_loader(n=8)]
    trainer.test(model, both, verbose=False)
    assert trainer.test_dataloaders == both and trainer.num_test_batches == [2, 1]
    trainer.predict(model, both[1])
    assert trainer.predict_dataloaders is both[1] and trainer.num_predict_batches == [1]
    without = make_trainer(max_steps=1, limit_val_batches=0)
    without.fit(model, regression_loader(), regression_loader(n=8))
    assert not without.enable_validation


def test_predict_without_keeping_the_predictions_returns_none(make_trainer):
    trainer = make_trainer()
    assert trainer.predict(Regression(), regression_loader(n=16), return_predictions=False) is None
    assert len(trainer.predict(Regression(), regression_loader(n=16))) == 2


def test_logged_metrics_are_what_the_loggers_got(make_trainer, tmp_path):
    trainer = make_trainer(
        max_epochs=1, logger=CSVLogger(tmp_path), log_every_n_steps=1, limit_train_batches=2
    )
    trainer.fit(Regression(), regression_loader(), regression_loader(n=8))
    assert set(trainer.logged_metrics) >= {"train_loss", "val_loss"}
    assert trainer.logged_metrics["val_loss"] == pytest.approx(
        float(trainer.callback_metrics["val_loss"])
    )


def test_optimizers_logger_and_loggers_can_be_set(make_trainer, tmp_path):
    trainer = make_trainer()
    logger = CSVLogger(tmp_path)
    trainer.logger = logger
    assert trainer.loggers == [logger]
    trainer.loggers = None
    assert trainer.logger is None and trainer.loggers == []
    optimizer = torch.optim.SGD(Regression().parameters(), lr=0.1)
    trainer.optimizers = [optimizer]
    assert trainer.optimizers == [optimizer]


def test_devices_scaler_sigterm_and_sampler_arguments_of_one_cpu_process(make_trainer):
    trainer = make_trainer()
    assert trainer.device_ids == [0] and trainer.num_devices == 1
    assert trainer.scaler is None and trainer.distributed_sampler_kwargs is None
    assert trainer.received_sigterm is False and trainer.barebones is False


def test_save_checkpoint_hands_storage_options_to_the_checkpoint_plugin(make_trainer, tmp_path):
    trainer = make_trainer(max_steps=1)
    trainer.fit(Regression(), regression_loader())
    with pytest.raises(TypeError, match="storage_options"):
        trainer.save_checkpoint(str(tmp_path / "x.ckpt"), storage_options={"bucket": "b"})
    trainer.save_checkpoint(str(tmp_path / "x.ckpt"), weights_only=None)
    assert (tmp_path / "x.ckpt").exists()


def test_print_prints_on_global_rank_zero(make_trainer, capsys):
    make_trainer().print("hello", 1, sep="-")
    assert capsys.readouterr().out == "hello-1\n"


def test_each_read_out_is_defined_once_in_the_class_of_its_concept():
    """The Trainer inherits its Lightning read-outs from one class per concept
    (trainkit/trainer/readouts/): no name is defined by two of them, nor again by the Trainer,
    and the settable ones are those Lightning programs set."""
    from trainkit import Trainer

    concepts = [
        cls for cls in Trainer.__mro__ if cls.__module__.startswith("trainkit.trainer.readouts.")
    ]
    properties = {
        cls: {name: member for name, member in vars(cls).items() if isinstance(member, property)}
        for cls in concepts
    }
    names = [name for members in properties.values() for name in members]
    assert len(concepts) == 9 and len(names) == len(set(names)) > 80
    assert not set(names) & set(vars(Trainer))
    settable = {name for members in properties.values() for name, p in members.items() if p.fset}
    assert settable == {
        "training",
        "validating",
        "testing",
        "predicting",
        "sanity_checking",
        "should_stop",
        "ckpt_path",
        "accumulate_grad_batches",
        "optimizers",
        "loggers",
        "logger",
        "cli_config",
    }
