"""The LightningModule members ported code uses: loggers, on_gpu, freeze, optimizer toggling,
clipping hooks, evaluation-mode hooks, save_hyperparameters(logger=), load_from_checkpoint
arguments, rank_zero_only.rank, and what it reads from trainer.strategy; Lightning's strategy
names and classes."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from tests.helpers.models import Regression, regression_loader
from trainkit import LightningModule, Trainer
from trainkit.errors import ConfigError
from trainkit.strategies import (
    DataParallelStrategy,
    DDPSpawnStrategy,
    DDPStrategy,
    DeepSpeedStrategy,
    FSDPStrategy,
    HorovodStrategy,
    ParallelStrategy,
    SingleDeviceStrategy,
)


class TwoHeads(LightningModule):
    def __init__(self) -> None:
        super().__init__()
        self.first = nn.Linear(2, 2)
        self.second = nn.Linear(2, 2)


def grads_on(module: nn.Module) -> list[bool]:
    return [p.requires_grad for p in module.parameters()]


def test_toggle_optimizer_leaves_gradients_only_to_its_parameters_and_untoggle_restores():
    module = TwoHeads()
    module.second.bias.requires_grad = False  # a user's own choice survives the toggling
    first = torch.optim.SGD(module.first.parameters(), lr=0.1)
    module.toggle_optimizer(first)
    assert grads_on(module) == [True, True, False, False]
    module.untoggle_optimizer(first)
    assert grads_on(module) == [True, True, True, False]
    with module.toggled_optimizer(torch.optim.SGD(module.second.parameters(), lr=0.1)):
        assert grads_on(module) == [False, False, True, False]
    assert grads_on(module) == [True, True, True, False]


def test_freeze_and_unfreeze_switch_gradients_and_mode():
    module = TwoHeads()
    module.freeze()
    assert not any(grads_on(module)) and not module.training
    module.unfreeze()
    assert all(grads_on(module)) and module.training


def test_members_without_a_trainer_have_safe_values():
    module = TwoHeads()
    assert module.logger is None and module.loggers == []
    assert module.on_gpu is False and module.example_input_array is None


def test_loggers_and_the_strategy_read_outs_ported_code_uses(make_trainer):
    seen = {}

    class Reads(Regression):
        def on_fit_start(self):
            strategy = self.trainer.strategy
            seen["logger"] = self.logger
            seen["loggers"] = self.loggers
            seen["strategy"] = (
                strategy.world_size,
                strategy.global_rank,
                strategy.num_processes,
                strategy.root_device,
            )

    trainer = make_trainer(max_steps=1, logger=True)
    trainer.fit(Reads(), regression_loader())
    assert seen["logger"] is trainer.logger and seen["loggers"] == trainer.loggers
    assert hasattr(seen["logger"], "experiment")  # the first default logger is TensorBoard
    assert seen["strategy"] == (1, 0, 1, torch.device("cpu"))


class ClipsItself(Regression):
    calls: list[tuple]

    def configure_gradient_clipping(self, optimizer, gradient_clip_val, gradient_clip_algorithm):
        self.calls.append((gradient_clip_val, gradient_clip_algorithm))
        self.clip_gradients(optimizer, gradient_clip_val=1e-3, gradient_clip_algorithm="value")


def test_configure_gradient_clipping_gets_the_trainer_settings_and_clips_its_way(make_trainer):
    model = ClipsItself()
    model.calls = []

    class SGDOne(type(model)):
        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=1.0)

    model.__class__ = SGDOne
    before = [p.detach().clone() for p in model.parameters()]
    make_trainer(max_steps=2, gradient_clip_val=5.0).fit(model, regression_loader())
    assert model.calls == [(5.0, "norm"), (5.0, "norm")]
    for old, new in zip(before, model.parameters()):
        assert (new.detach() - old).abs().max() <= 2e-3 + 1e-7  # two steps of at most 1e-3


class KeepsDropout(Regression):
    """Evaluates with its own mode choice, as the on_*_model_eval hooks allow."""

    def __init__(self) -> None:
        super().__init__()
        self.modes: list[bool] = []

    def on_validation_model_eval(self) -> None:
        self.train()  # e.g. Monte-Carlo dropout

    def validation_step(self, batch, batch_idx):
        self.modes.append(self.training)


def test_on_validation_model_eval_decides_the_mode_of_validation(make_trainer):
    model = KeepsDropout()
    make_trainer(max_epochs=1).fit(model, regression_loader(), regression_loader(n=8))
    assert model.modes == [True] and model.training


def test_save_hyperparameters_logger_false_keeps_them_out_of_the_loggers(make_trainer, tmp_path):
    class Quiet(Regression):
        def __init__(self, lr: float = 0.05, secret: str = "s3") -> None:
            super().__init__(lr=lr)
            self.save_hyperparameters(ignore=["secret"], logger=False)

    model = Quiet()
    assert dict(model.hparams) == {"lr": 0.05}
    trainer = make_trainer(max_steps=1, logger=True)
    trainer.fit(model, regression_loader())
    assert "lr" not in (tmp_path / "trainkit_logs" / "version_0" / "hparams.yaml").read_text()


def test_load_from_checkpoint_takes_lightnings_argument_names(make_trainer, tmp_path):
    trainer = make_trainer(max_steps=1)
    trainer.fit(Regression(lr=0.2), regression_loader())
    path = tmp_path / "m.ckpt"
    trainer.save_checkpoint(str(path))
    loaded = Regression.load_from_checkpoint(checkpoint_path=str(path), map_location="cpu")
    assert loaded.hparams.lr == 0.2
    hparams = tmp_path / "hparams.yaml"
    hparams.write_text("lr: 0.3\n")
    assert Regression.load_from_checkpoint(path, hparams_file=str(hparams)).hparams.lr == 0.3

    class Wider(Regression):  # an extra layer the checkpoint lacks: loads only when not strict
        def __init__(self, lr: float = 0.05, features: int = 4) -> None:
            super().__init__(lr=lr, features=features)
            self.extra = nn.Linear(1, 1)

    with pytest.raises(Exception, match="extra"):
        Wider.load_from_checkpoint(path)
    assert Wider.load_from_checkpoint(path, strict=False).hparams.lr == 0.2


def test_rank_zero_only_rank_is_set_for_lightning_utilities(make_trainer):
    from lightning_utilities.core.rank_zero import rank_zero_only

    make_trainer(max_steps=1).fit(Regression(), regression_loader())
    assert rank_zero_only.rank == 0


@pytest.mark.parametrize(
    ("alias", "kind", "setting"),
    [
        ("ddp_find_unused_parameters_true", DDPStrategy, ("find_unused_parameters", True)),
        (
            "ddp_spawn_find_unused_parameters_true",
            DDPSpawnStrategy,
            ("find_unused_parameters", True),
        ),
        ("ddp_fork", DDPSpawnStrategy, ("start_method", "fork")),
        ("fsdp_cpu_offload", FSDPStrategy, ("cpu_offload", True)),
        ("single_device", SingleDeviceStrategy, None),
    ],
)
def test_lightning_strategy_aliases_build_the_strategy_they_name(alias, kind, setting):
    trainer = Trainer(
        accelerator="cpu",
        devices=1 if kind is SingleDeviceStrategy else 2,
        strategy=alias,
        logger=False,
    )
    assert type(trainer.strategy) is kind
    if setting is not None:
        name, value = setting
        found = getattr(trainer.strategy, name, None)
        options = getattr(trainer.strategy, "options", None)
        assert value in (found, getattr(options, name, None))


@pytest.mark.parametrize(("named", "kind"), [("horovod", HorovodStrategy), ("ddp", DDPStrategy)])
def test_lightning_1x_strategy_named_as_accelerator_runs_that_strategy(named, kind):
    """Lightning 1.x's ``Trainer(accelerator="horovod")`` / ``"ddp"``: the strategy, warned."""
    with pytest.warns(UserWarning, match=f"Lightning 1.x's spelling of trainer.strategy '{named}'"):
        trainer = Trainer(accelerator=named, devices=1, logger=False)
    assert type(trainer.strategy) is kind


def test_a_strategy_named_as_accelerator_beside_another_strategy_is_refused():
    with pytest.raises(ConfigError, match=r"trainer.accelerator 'ddp'.*already 'fsdp'"):
        Trainer(accelerator="ddp", strategy="fsdp", devices=1, logger=False)


def test_parallel_strategies_share_lightnings_base_class():
    for kind in (
        DDPStrategy,
        DDPSpawnStrategy,
        FSDPStrategy,
        DeepSpeedStrategy,
        DataParallelStrategy,
    ):
        assert issubclass(kind, ParallelStrategy)
    assert not issubclass(SingleDeviceStrategy, ParallelStrategy)
