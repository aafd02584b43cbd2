"""Members of LightningModule and LightningDataModule that Lightning programs use beside the
hooks: hyperparameters on both (``logger=False``, ``hparams_initial``,
``remove_ignored_hparams``), ``load_from_checkpoint`` (refused on an instance), ``self.log``'s
remaining arguments, ``manual_backward``'s, ``prepare_data`` and ``prepare_data_per_node``, the
data module's transfer hooks, ``on_exception`` and ``from_datasets``, and what
``on_train_batch_end`` receives. (Signatures: tests/unit/test_lightning_signatures.py.)"""

from __future__ import annotations

import pytest
import torch
import yaml
from torch.nn import functional as F

from tests.helpers.models import Regression, regression_data, regression_loader
from trainkit import CSVLogger, DataModule, LightningModule


class Data(DataModule):
    def __init__(self, batch_size: int = 8, secret: str = "s3") -> None:
        super().__init__()
        self.save_hyperparameters(ignore=["secret"], logger=False)
        self.prepared = 0
        self.seen_state: dict = {}

    def prepare_data(self) -> None:
        self.prepared += 1

    def train_dataloader(self):
        return regression_loader(batch_size=self.hparams.batch_size)

    def val_dataloader(self):
        return regression_loader(n=16, batch_size=self.hparams.batch_size)

    def state_dict(self) -> dict:
        return {"prepared": self.prepared}

    def load_state_dict(self, state_dict: dict) -> None:
        self.seen_state = state_dict


def test_data_module_hyperparameters_with_logger_false_stay_out_of_the_loggers(
    make_trainer, tmp_path
):
    data = Data(batch_size=16)
    assert dict(data.hparams) == {"batch_size": 16} and not data.log_hyperparams
    trainer = make_trainer(max_steps=1, logger=CSVLogger(tmp_path))
    trainer.fit(Regression(), datamodule=data)
    logged = yaml.safe_load((tmp_path / "trainkit_logs" / "version_0" / "hparams.yaml").read_text())
    assert "batch_size" not in logged and logged["lr"] == 0.05


def test_hparams_initial_is_a_copy_of_what_was_saved_and_ignored_names_can_be_dropped():
    model = Regression(lr=0.1)
    model.hparams.lr = 0.2
    assert model.hparams_initial == {"lr": 0.1, "features": 4}
    model.hparams_initial["lr"] = 9.0  # a copy: the saved values stay
    assert model.hparams_initial["lr"] == 0.1
    model.remove_ignored_hparams(["features"])
    assert dict(model.hparams) == {"lr": 0.2}
    assert Data.CHECKPOINT_HYPER_PARAMS_KEY == "datamodule_hyper_parameters"
    assert Regression.CHECKPOINT_HYPER_PARAMS_KEY == "hyper_parameters"


def test_load_from_checkpoint_builds_the_module_and_the_data_module_and_refuses_an_instance(
    make_trainer, tmp_path
):
    model, data = Regression(lr=0.3), Data(batch_size=4)
    trainer = make_trainer(max_steps=2)
    trainer.fit(model, datamodule=data)
    path = str(tmp_path / "x.ckpt")
    trainer.save_checkpoint(path)
    loaded = Regression.load_from_checkpoint(path, weights_only=True)
    assert loaded.hparams.lr == 0.3 and torch.equal(loaded.layer.weight, model.layer.weight)
    with pytest.raises(TypeError, match="called on an instance; expected a call on the class"):
        model.load_from_checkpoint(path)
    again = Data.load_from_checkpoint(path, batch_size=2)
    assert again.hparams.batch_size == 2 and again.seen_state == {"prepared": 1}
    with pytest.raises(TypeError, match=r"Data\.load_from_checkpoint was called on an instance"):
        data.load_from_checkpoint(path)


class Logs(Regression):
    """Logs with Lightning's rarer ``self.log`` arguments."""

    def training_step(self, batch, batch_idx):
        loss = super().training_step(batch, batch_idx)
        self.log("peak", loss, reduce_fx=torch.max, on_epoch=True, logger=None)
        self.log("graph", loss, enable_graph=True, on_epoch=False)
        self.graph_kept = self.trainer.callback_metrics["graph"].requires_grad
        self.log_dict({"a": 1.0, "b": 2.0}, prog_bar=True, rank_zero_only=True, sync_dist=True)
        return loss

    def validation_step(self, batch, batch_idx, dataloader_idx=0):
        self.log("shared", 1.0 + dataloader_idx, add_dataloader_idx=False)
        self.log("each", 1.0 + dataloader_idx)


def test_self_log_takes_lightnings_remaining_arguments(make_trainer):
    model = Logs()
    trainer = make_trainer(max_epochs=1, limit_train_batches=2)
    trainer.fit(model, regression_loader())
    metrics = trainer.callback_metrics
    assert float(metrics["peak_epoch"]) == max(
        float(metrics["peak_step"]), float(metrics["peak_epoch"])
    )
    assert model.graph_kept and set(trainer.progress_bar_metrics) >= {"a", "b"}
    results = trainer.validate(
        model, [regression_loader(n=8), regression_loader(n=8)], verbose=False
    )
    assert set(results[0]) == {"shared", "each/dataloader_idx_0"}
    assert set(results[1]) == {"shared", "each/dataloader_idx_1"}


def test_a_sync_dist_group_is_refused_with_the_fix(make_trainer):
    class Grouped(Regression):
        def training_step(self, batch, batch_idx):
            loss = super().training_step(batch, batch_idx)
            self.log("x", loss, sync_dist=True, sync_dist_group=object())
            return loss

    with pytest.raises(ValueError, match=r"sync_dist_group=.*expected None.*self\.all_gather"):
        make_trainer(max_steps=1).fit(Grouped(), regression_loader())


def test_manual_backward_passes_its_arguments_to_backward(make_trainer):
    class TwoBackwards(Regression):
        def __init__(self) -> None:
            super().__init__()
            self.automatic_optimization = False

        def training_step(self, batch, batch_idx):
            x, y = batch
            loss = F.mse_loss(self(x), y)
            self.manual_backward(loss, retain_graph=True)
            self.manual_backward(loss)  # the graph is still there
            optimizer = self.optimizers(use_pl_optimizer=False)
            optimizer.step()
            optimizer.zero_grad()

    # the unwrapped optimizer's steps are not counted (as in Lightning): max_steps would not end
    make_trainer(max_epochs=1).fit(TwoBackwards(), regression_loader())


def test_prepare_data_of_module_and_data_module_runs_before_setup(make_trainer):
    order = []

    class Prepares(Regression):
        def prepare_data(self):
            order.append("module.prepare_data")

        def setup(self, stage):
            order.append(f"module.setup({stage})")

    class PreparedData(Data):
        def prepare_data(self):
            order.append("datamodule.prepare_data")

    module = Prepares()
    module.prepare_data_per_node = False  # global rank 0 only: the same here
    make_trainer(max_steps=1).fit(module, datamodule=PreparedData())
    assert order == ["datamodule.prepare_data", "module.prepare_data", "module.setup(fit)"]


def test_the_data_modules_transfer_hooks_replace_the_modules_with_the_loaders_index(make_trainer):
    seen = []

    class Moves(Data):
        def on_before_batch_transfer(self, batch, dataloader_idx):
            seen.append(("before", dataloader_idx))
            return batch

        def transfer_batch_to_device(self, batch, device, dataloader_idx):
            seen.append(("to", device.type, dataloader_idx))
            return super().transfer_batch_to_device(batch, device, dataloader_idx)

    class ModuleMoves(Regression):
        def on_after_batch_transfer(self, batch, dataloader_idx):
            seen.append(("after", dataloader_idx))
            return batch

        def validation_step(self, batch, batch_idx, dataloader_idx=0):
            super().validation_step(batch, batch_idx)

    trainer = make_trainer(max_steps=1, limit_val_batches=1)
    trainer.fit(ModuleMoves(), datamodule=Moves())
    assert seen[:3] == [("before", 0), ("to", "cpu", 0), ("after", 0)]
    seen.clear()
    trainer.validate(dataloaders=[regression_loader(n=8), regression_loader(n=8)], verbose=False)
    assert seen[-3:] == [("before", 1), ("to", "cpu", 1), ("after", 1)]


def test_the_data_module_hears_of_a_failure(make_trainer):
    failures = []

    class Hears(Data):
        def on_exception(self, exception):
            failures.append(str(exception))

    class Fails(Regression):
        def training_step(self, batch, batch_idx):
            raise ValueError("on purpose")

    with pytest.raises(ValueError):
        make_trainer(max_steps=1).fit(Fails(), datamodule=Hears())
    assert failures == ["on purpose"]


def test_from_datasets_serves_each_dataset(make_trainer):
    class Sized(DataModule):
        def __init__(self, batch_size: int = 1) -> None:
            super().__init__()
            self.size = batch_size

    data = Sized.from_datasets(
        regression_data(32), val_dataset=[regression_data(8), regression_data(16)], batch_size=8
    )
    assert data.size == 8 and data.name is None
    assert len(data.train_dataloader()) == 4 and [len(v) for v in data.val_dataloader()] == [1, 2]
    make_trainer(max_steps=2).fit(
        Regression(), datamodule=DataModule.from_datasets(regression_data(16))
    )


def test_on_train_batch_end_gets_the_detached_loss_divided_by_the_accumulated_batches(
    make_trainer,
):
    got = []

    class Watches(Regression):
        def training_step(self, batch, batch_idx):
            loss = super().training_step(batch, batch_idx)
            got.append(loss.item())
            return {"loss": loss, "extra": 7}

        def on_train_batch_end(self, outputs, batch, batch_idx):
            got.append(outputs)

    make_trainer(max_steps=1, accumulate_grad_batches=2).fit(Watches(), regression_loader())
    loss, outputs = got[0], got[1]
    assert outputs["extra"] == 7 and not outputs["loss"].requires_grad
    assert float(outputs["loss"]) == pytest.approx(loss / 2)


def test_the_module_forward_must_be_defined():
    with pytest.raises(NotImplementedError):
        LightningModule()(torch.zeros(1))
