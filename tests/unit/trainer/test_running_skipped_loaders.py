"""As Lightning, a loader hook is not called for a loop its limit of 0 skips: a
``val_dataloader`` that cannot build (data not there) does not stop a fit or an evaluation
that runs none of it."""

from __future__ import annotations

import pytest

from tests.helpers.models import Regression, regression_loader


class MissingEvaluationData(Regression):
    """Training data only: every evaluation loader hook raises."""

    def forward(self, x):
        return self.layer(x)

    def train_dataloader(self):
        return regression_loader()

    def val_dataloader(self):
        raise FileNotFoundError("val.csv")

    test_dataloader = predict_dataloader = val_dataloader


def test_a_fit_with_limit_val_batches_0_never_asks_for_validation_data(make_trainer):
    fit = make_trainer(max_epochs=1, limit_val_batches=0)
    fit.fit(MissingEvaluationData())
    assert fit.current_epoch == 1 and fit.num_val_batches == []


@pytest.mark.parametrize("stage", ["validate", "test", "predict"])
def test_an_evaluation_with_limit_0_never_asks_for_its_data(make_trainer, stage):
    kind = "val" if stage == "validate" else stage
    runner = make_trainer(**{f"limit_{kind}_batches": 0})
    assert getattr(runner, stage)(MissingEvaluationData()) == []


def test_with_a_limit_the_hook_is_asked_and_its_error_is_the_users(make_trainer):
    with pytest.raises(FileNotFoundError, match=r"val\.csv"):
        make_trainer().validate(MissingEvaluationData())
