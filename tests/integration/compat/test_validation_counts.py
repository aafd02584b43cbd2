"""Validation batch counts and empty evaluations as Lightning has them: ``num_val_batches`` reads
the fit's validation loaders (``[]`` until the fit loaded them) unless the Trainer is in or
after ``validate``; an evaluation with no batches to run (``limit_*_batches=0``, empty loaders)
or a fit without ``validation_step`` runs no evaluation hook at all."""

from __future__ import annotations

import warnings
from pathlib import Path
from types import ModuleType
from typing import Any

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from tests.integration.compat.frameworks import BOTH, framework, quiet_trainer

EVALUATION_HOOKS = [
    f"on_{stage}_{when}"
    for stage in ("validation", "test")
    for when in ("start", "epoch_start", "epoch_end", "end")
]


def module_class(pl: ModuleType, steps: bool = True) -> type:
    """A module that records its evaluation hooks (``calls``) and logs at each epoch end."""

    class Model(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.layer = nn.Linear(2, 1)
            self.calls: list[str] = []

        def training_step(self, batch, batch_idx):
            return self.layer(batch[0]).pow(2).mean()

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    def recording(name: str) -> Any:
        def hook(self: Any) -> None:
            self.calls.append(name)
            if name.endswith("epoch_end"):
                self.log(name, 1.0)

        return hook

    for name in EVALUATION_HOOKS:
        setattr(Model, name, recording(name))
    if not steps:
        return Model

    class WithSteps(Model):
        def validation_step(self, batch, batch_idx, dataloader_idx=0):
            self.log("v", self.layer(batch[0]).sum())

        def test_step(self, batch, batch_idx, dataloader_idx=0):
            self.log("t", self.layer(batch[0]).sum())

    return WithSteps


def loader(batches: int) -> DataLoader:
    data = torch.randn(2 * batches, 2, generator=torch.Generator().manual_seed(batches))
    return DataLoader(TensorDataset(data), batch_size=2)


def counts(trainer: Any) -> tuple[list[float], list[float]]:
    return list(trainer.num_val_batches), list(trainer.num_sanity_val_batches)


@BOTH
def test_num_val_batches_are_the_fits_unless_the_trainer_validates(tmp_path: Path, pl_name: str):
    pl = framework(pl_name)
    read = {}

    def fit(name: str, **settings: Any) -> Any:
        trainer = quiet_trainer(pl, tmp_path, logger=False, max_epochs=1, **settings)
        model = module_class(pl)()
        trainer.fit(model, loader(4), [loader(3), loader(2)])
        read[name] = counts(trainer)
        return trainer, model

    fit("never validates", check_val_every_n_epoch=2)
    fit("sanity check only", check_val_every_n_epoch=2, num_sanity_val_steps=2)
    fit("stopped before its validation", max_steps=1)
    fit("limit 0", limit_val_batches=0, num_sanity_val_steps=2)
    trainer, model = fit("validated", limit_val_batches=2, num_sanity_val_steps=1)
    trainer.test(model, loader(1), verbose=False)
    read["then test"] = counts(trainer)
    trainer.validate(model, [loader(5)], verbose=False)
    read["then validate"] = counts(trainer)
    trainer.test(model, loader(1), verbose=False)
    read["then test again"] = counts(trainer)
    assert read == {
        "never validates": ([], []),
        "sanity check only": ([3, 2], [2, 2]),
        "stopped before its validation": ([3, 2], [0, 0]),  # loaded as the first epoch began
        "limit 0": ([], []),
        "validated": ([2, 2], [1, 1]),
        "then test": ([2, 2], [1, 1]),
        "then validate": ([2], [1, 1]),  # validate's; the sanity counts stay the fit's
        "then test again": ([2, 2], [1, 1]),
    }


@BOTH
def test_an_evaluation_without_batches_runs_no_hook(tmp_path: Path, pl_name: str):
    """limit_val_batches=0 or limit_test_batches=0 loads nothing; an empty loader is loaded
    (its count is 0) and run as no loop: no start/end hook, nothing logged, no result."""
    pl = framework(pl_name)
    seen = {}
    for name, settings, stage, loaders in [
        ("validate, limit 0", {"limit_val_batches": 0}, "validate", loader(3)),
        ("test, limit 0", {"limit_test_batches": 0}, "test", loader(3)),
        ("validate, empty loader", {}, "validate", [loader(0)]),
    ]:
        trainer = quiet_trainer(pl, tmp_path, logger=False, **settings)
        model = module_class(pl)()
        results = getattr(trainer, stage)(model, loaders, verbose=False)
        seen[name] = (
            results,
            model.calls,
            sorted(trainer.callback_metrics),
            list(
                getattr(trainer, "num_val_batches" if stage == "validate" else "num_test_batches")
            ),
        )
    assert seen == {
        "validate, limit 0": ([], [], [], []),
        "test, limit 0": ([], [], [], []),
        "validate, empty loader": ([], [], [], [0]),
    }


@BOTH
def test_a_fit_after_validate_with_limit_0_logs_no_epoch_end_metric(tmp_path, pl_name):
    """The program behind a differential seed: fit, then validate, with limit_val_batches=0."""
    pl = framework(pl_name)
    trainer = quiet_trainer(pl, tmp_path, logger=False, max_epochs=1, limit_val_batches=0)
    model = module_class(pl)()
    trainer.fit(model, loader(4), loader(2))
    assert trainer.validate(model, loader(2), verbose=False) == []
    assert model.calls == [] and "on_validation_epoch_end" not in trainer.callback_metrics
    assert trainer.num_val_batches == []


@BOTH
def test_validation_loaders_without_a_validation_step_are_skipped(tmp_path, pl_name):
    pl = framework(pl_name)
    trainer = quiet_trainer(pl, tmp_path, logger=False, max_epochs=1, num_sanity_val_steps=2)
    model = module_class(pl, steps=False)()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        trainer.fit(model, loader(4), [loader(3), loader(2)])
    said = [str(w.message) for w in caught if "validation_step" in str(w.message)]
    assert said == [
        "You passed in a `val_dataloader` but have no `validation_step`. Skipping val loop."
    ]
    assert model.calls == [] and counts(trainer) == ([], [])
