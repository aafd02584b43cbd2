"""Lightning's import paths that trainkit answers with its own objects: ``core``, ``trainer``
and ``trainer.states``, ``demos``, ``plugins`` (``io``, ``precision``)."""

from __future__ import annotations

import torch
from torch import nn

from trainkit import DataModule, TrainModule


def test_core_holds_the_module_classes():
    from trainkit.core import LightningDataModule, LightningModule

    assert LightningModule is TrainModule and LightningDataModule is DataModule


def test_hyperparameters_mixin_gives_any_class_save_hyperparameters():
    from trainkit.core.mixins import HyperparametersMixin

    class Encoder(HyperparametersMixin, nn.Module):
        def __init__(self, width: int = 8, depth: int = 2, activation: str = "relu") -> None:
            super().__init__()
            self.save_hyperparameters(ignore="activation")

    encoder = Encoder(width=16)
    assert encoder.hparams == {"width": 16, "depth": 2} and encoder.hparams.width == 16
    encoder.hparams.width = 32
    assert encoder.hparams_initial.width == 16
    assert Encoder.__mro__[1] is HyperparametersMixin and HyperparametersMixin().hparams == {}


def test_trainer_package_and_stage_names(make_trainer):
    from trainkit.seed import seed_everything
    from trainkit.trainer import Trainer
    from trainkit.trainer import seed_everything as trainer_seed
    from trainkit.trainer.states import RunningStage, TrainerFn, TrainerState, TrainerStatus

    assert trainer_seed is seed_everything and Trainer is type(make_trainer())
    stages: list[str] = []

    class Records(TrainModule):
        def __init__(self) -> None:
            super().__init__()
            self.layer = nn.Linear(2, 1)

        def setup(self, stage: str) -> None:
            if stage == TrainerFn.FITTING:  # a Lightning program's check
                stages.append("fitting")

        def training_step(self, batch, batch_idx):
            return self.layer(batch[0]).sum()

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(torch.ones(2, 2)))
    make_trainer(max_steps=1).fit(Records(), loader)
    assert stages == ["fitting"]
    assert RunningStage.SANITY_CHECKING.evaluating and not RunningStage.TRAINING.evaluating
    assert RunningStage.SANITY_CHECKING.dataloader_prefix == "val"
    assert RunningStage.TESTING.dataloader_prefix == "test"
    state = TrainerState(TrainerStatus.FINISHED, TrainerFn.TESTING, RunningStage.TESTING)
    assert state.finished and state.stopped and not TrainerState().stopped


def test_the_boring_model_runs_every_stage(make_trainer):
    from trainkit.demos import BoringDataModule, BoringModel, DemoModel

    trainer = make_trainer(max_epochs=1, limit_train_batches=4, limit_val_batches=2)
    model = BoringModel()
    before = model.layer.weight.detach().clone()
    trainer.fit(model)
    assert not torch.equal(before, model.layer.weight) and trainer.global_step == 4
    assert len(trainer.predict(model)) == 64
    trainer = make_trainer(max_epochs=1, limit_train_batches=2)
    trainer.fit(BoringModel(), datamodule=BoringDataModule())
    trainer.test(BoringModel(), datamodule=BoringDataModule(), verbose=False)
    demo = DemoModel(out_dim=3)
    make_trainer(max_steps=2).fit(demo, BoringModel().train_dataloader())
    assert demo(torch.zeros(1, 32)).shape == (1, 3)


def test_plugins_at_lightnings_paths(make_trainer):
    from trainkit.plugins import (
        AsyncCheckpointIO,
        CheckpointIO,
        Precision,
        TorchCheckpointIO,
        io,
        precision,
    )

    assert (io.AsyncCheckpointIO, io.CheckpointIO, io.TorchCheckpointIO) == (
        AsyncCheckpointIO,
        CheckpointIO,
        TorchCheckpointIO,
    )
    assert precision.Precision is Precision
    assert isinstance(make_trainer().precision_plugin, Precision)


def test_subpackages_are_attributes_of_the_package_as_in_lightning():
    import trainkit as pl
    from trainkit.utilities import rank_zero_only

    assert pl.utilities.rank_zero_only is rank_zero_only
    assert pl.profilers.SimpleProfiler.__name__ == "SimpleProfiler"
    assert pl.callbacks.LambdaCallback.__name__ == "LambdaCallback"
