"""Precision: the fp16 loss scale is torch's GradScaler unless the strategy's engine scales it."""

from __future__ import annotations

import warnings

import torch

from trainkit.strategies.precision import Precision


def test_16_mixed_scales_the_loss_with_a_grad_scaler():
    with warnings.catch_warnings():  # torch warns that CUDA is missing for its scaler here
        warnings.simplefilter("ignore")
        precision = Precision("16-mixed", "cuda")
    assert isinstance(precision.scaler, torch.amp.GradScaler)
    assert precision.autocast_dtype is torch.float16


def test_an_engine_that_scales_the_fp16_loss_gets_it_unscaled():
    """deepspeed's fp16 section scales the loss in its own backward: no GradScaler on top."""
    precision = Precision("16-mixed", "cuda", scales_loss=False)
    loss = torch.tensor(2.0)
    assert precision.scaler is None
    assert precision.scale(loss) is loss
    assert precision.state_dict() == {}
