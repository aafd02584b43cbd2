"""torch.compile: a module the user compiled, or the Trainer's ``compile`` setting, trains to
the same weights as eager; checkpoints keep the module's own names; the module is given back
uncompiled; a bad setting is one line."""

from __future__ import annotations

import pytest
import torch
from torch._dynamo.testing import CompileCounter

from tests.helpers.models import Regression, regression_loader
from trainkit import Trainer
from trainkit.errors import ConfigError


def fitted(make_trainer, model, **kwargs):
    trainer = make_trainer(max_epochs=2, **kwargs)
    trainer.fit(model, regression_loader())
    return trainer


@pytest.fixture
def eager_weights(make_trainer):
    torch.manual_seed(0)
    model = Regression()
    fitted(make_trainer, model)
    return model.layer.weight.detach().clone()


def test_a_module_the_user_compiled_trains_with_their_compiler(make_trainer, eager_weights):
    torch.manual_seed(0)
    model = Regression()
    counter = CompileCounter()  # a torch.compile backend that counts the graphs it compiles
    trainer = fitted(make_trainer, torch.compile(model, backend=counter))
    assert counter.frame_count == 1  # compiled once, reused for all 16 steps
    assert torch.equal(model.layer.weight, eager_weights)
    assert trainer.lightning_module is model and "forward" not in vars(model)


def test_the_compile_setting_compiles_in_the_rank_and_checkpoints_keep_plain_names(
    make_trainer, eager_weights, tmp_path
):
    torch.manual_seed(0)
    model = Regression()
    trainer = fitted(make_trainer, model, compile={"backend": "eager"})
    assert torch.equal(model.layer.weight, eager_weights)
    trainer.save_checkpoint(str(tmp_path / "c.ckpt"))
    saved = torch.load(tmp_path / "c.ckpt", weights_only=False)["state_dict"]
    assert sorted(saved) == ["layer.bias", "layer.weight"]


def test_a_compile_setting_that_is_no_mode_is_refused():
    with pytest.raises(ConfigError, match=r"compile.*'fastest'.*reduce-overhead"):
        Trainer(compile="fastest")
