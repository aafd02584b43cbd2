"""The Trainer's compile setting on 2 gloo ranks under ddp and fsdp: training runs compiled,
recompilations are logged with their reason, checkpoints keep the module's own names."""

from __future__ import annotations

import pytest
import torch

from tests.helpers.command_env import REPO, cli_env

CONFIG = str(REPO / "configs" / "autoencoder.yaml")


@pytest.mark.timeout(240)
@pytest.mark.parametrize("strategy", ["ddp", "fsdp"])
def test_compiled_forward_trains_on_two_ranks(run_main, tmp_path, no_leftovers, strategy):
    done = run_main(
        "fit",
        "-c",
        CONFIG,
        "--trainer.devices",
        "2",
        "--trainer.strategy",
        strategy,
        "--trainer.max_epochs",
        "1",
        "--trainer.limit_train_batches",
        "6",
        "--trainer.compile",
        '{"backend": "aot_eager"}',
        "--trainer.default_root_dir",
        str(tmp_path),
        env=cli_env(),
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert "[__recompiles] Recompiling function forward" in done.stderr  # training -> validation
    (last,) = tmp_path.glob("*/version_0/checkpoints/last.ckpt")
    names = torch.load(last, weights_only=False)["state_dict"]
    assert names and not any("_orig_mod" in name for name in names)
