"""Trainer used from an interactive session (stdin here; a notebook is the same): no re-execution."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from tests.helpers.command_env import cli_env

SESSION = textwrap.dedent("""
    import torch
    from torch.nn import functional as F
    from torch.utils.data import DataLoader, TensorDataset
    import trainkit as tk

    class Tiny(tk.TrainModule):          # defined in __main__, as in a notebook cell
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(4, 1)

        def training_step(self, batch, batch_idx):
            x, y = batch
            return F.mse_loss(self.layer(x), y)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    tk.seed_everything(0)
    x = torch.randn(64, 4)
    data = DataLoader(TensorDataset(x, x.sum(1, keepdim=True)), batch_size=8)
    model = Tiny()
    before = model.layer.weight.detach().clone()
    trainer = tk.Trainer(accelerator="cpu", devices=2, max_epochs=2, logger=False, enable_progress_bar=False,
                         default_root_dir=ROOT, STRATEGY)
    trainer.fit(model, data)
    print("RESULT", trainer.strategy.name, trainer.global_step, bool((model.layer.weight != before).any()))
""")


@pytest.mark.timeout(120)
@pytest.mark.parametrize("strategy", ["auto", "ddp_spawn"])
def test_fit_from_stdin_forks_ranks_and_returns_trained_weights(tmp_path, no_leftovers, strategy):
    code = SESSION.replace("ROOT", repr(str(tmp_path))).replace(
        "STRATEGY", f"strategy={strategy!r}"
    )
    result = subprocess.run(
        [sys.executable, "-"],
        input=code,
        capture_output=True,
        text=True,
        timeout=220,
        env=cli_env(),
        cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr
    assert "RESULT ddp_spawn 8 True" in result.stdout
    if strategy == "auto":
        assert "cannot be re-run per rank (interactive)" in result.stderr
