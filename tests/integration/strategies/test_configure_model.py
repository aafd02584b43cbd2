"""configure_model: layers built there train; under fsdp each rank creates them on the meta
device and materialises only its shard (under ZeRO stage 3 each layer is partitioned as it is
made), equal to the unsharded model from the same seed, so both end with ddp's weights."""

from __future__ import annotations

import pytest
import torch

from tests.helpers.command_env import cli_env

CONFIG = """
seed_everything: 7
model:
  class_path: tests.helpers.sharded_models.LayerStack
data:
  class_path: tests.helpers.sharded_models.StackData
trainer:
  max_epochs: 2
  devices: {devices}
  strategy: {strategy}
  enable_progress_bar: false
  logger: false
"""


def fitted_weights(run_main, tmp_path, strategy: str, devices: int = 2) -> dict:
    root = tmp_path / strategy
    root.mkdir()
    config = root / "config.yaml"
    config.write_text(CONFIG.format(devices=devices, strategy=strategy))
    done = run_main(
        "fit", "-c", str(config), "--trainer.default_root_dir", str(root), env=cli_env()
    )
    assert done.returncode == 0, done.stderr[-4000:]
    (last,) = root.glob("**/last.ckpt")
    return torch.load(last, weights_only=False)["state_dict"]


@pytest.mark.timeout(400)
def test_shard_first_fsdp_and_zero3_end_with_the_weights_of_ddp(run_main, tmp_path, no_leftovers):
    ddp = fitted_weights(run_main, tmp_path, "ddp")
    for strategy in ("fsdp", "deepspeed_stage_3"):
        sharded = fitted_weights(run_main, tmp_path, strategy)
        assert sorted(sharded) == sorted(ddp) and len(ddp) == 8, strategy
        for name, value in ddp.items():
            torch.testing.assert_close(sharded[name], value, rtol=0, atol=1e-6, msg=strategy)


def test_layers_built_in_configure_model_train_on_one_device(make_trainer):
    from tests.helpers.sharded_models import LayerStack, StackData

    model = LayerStack()
    trainer = make_trainer(max_epochs=1)
    trainer.fit(model, datamodule=StackData())
    assert model.configured == 1 and trainer.global_step == 8
    predictions = trainer.predict(model, StackData().train_dataloader())
    assert model.configured == 2 and len(predictions) == 8  # called again, built once
