"""LambdaCallback: the functions given are called at their hooks in a real run."""

from __future__ import annotations

import pytest

from tests.helpers.models import Regression, regression_loader
from trainkit.callbacks import LambdaCallback


def test_lambda_callback_calls_the_functions_given(make_trainer):
    seen: list[tuple[str, object]] = []
    callback = LambdaCallback(
        on_fit_start=lambda trainer, pl_module: seen.append(("fit_start", trainer.global_step)),
        on_train_batch_end=lambda trainer, pl_module, outputs, batch, batch_idx: seen.append(
            ("batch_end", batch_idx)
        ),
        setup=lambda trainer, pl_module, stage: seen.append(("setup", stage)),
    )
    make_trainer(max_steps=2, callbacks=[callback]).fit(Regression(), regression_loader())
    assert seen == [("setup", "fit"), ("fit_start", 0), ("batch_end", 0), ("batch_end", 1)]
    with pytest.raises(TypeError, match="on_fit_end=3"):
        LambdaCallback(on_fit_end=3)  # type: ignore[arg-type]
