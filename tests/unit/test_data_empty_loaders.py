"""An empty loader is said as Lightning says it: once per loader each time a loop loads its
loaders (fit's validation once per fit, each validate/test/predict call), never an error."""

from __future__ import annotations

import warnings

import torch
from torch.utils.data import DataLoader, TensorDataset

from tests.helpers.models import Regression, regression_loader

EMPTY = "Total length of `DataLoader` across ranks is zero"


def empty_loader() -> DataLoader:
    return DataLoader(TensorDataset(torch.zeros(0, 4), torch.zeros(0, 1)), batch_size=4)


def said(call) -> int:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call()
    return sum(EMPTY in str(w.message) for w in caught)


class SeveralLoaders(Regression):
    def validation_step(self, batch, batch_idx, dataloader_idx=0):
        super().validation_step(batch, batch_idx)


def test_a_fit_says_each_empty_validation_loader_once_however_many_epochs(make_trainer):
    fit = make_trainer(max_epochs=3, num_sanity_val_steps=2)
    model = SeveralLoaders()
    loaders = [empty_loader(), regression_loader(seed=1), empty_loader()]
    assert said(lambda: fit.fit(model, regression_loader(), loaders)) == 2
    assert fit.current_epoch == 3  # trained on


def test_each_validate_test_and_predict_call_says_it_again(make_trainer):
    model = Regression()
    runner = make_trainer(enable_model_summary=False)
    assert said(lambda: runner.validate(model, empty_loader())) == 1
    assert said(lambda: runner.validate(model, empty_loader())) == 1
    assert said(lambda: runner.test(model, empty_loader())) == 1
    assert said(lambda: runner.predict(model, empty_loader())) == 1


def test_a_limit_of_zero_loads_nothing_so_says_nothing(make_trainer):
    model = Regression()
    assert said(lambda: make_trainer(limit_test_batches=0).test(model, empty_loader())) == 0
