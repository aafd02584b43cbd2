"""``rank_zero_only.rank`` in real ranks: right from import (each rank started with its rank
variables) and during the stage, so a program's rank-zero logging runs once."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from tests.helpers.command_env import cli_env

PROGRAM = textwrap.dedent(
    """
    import os
    import sys
    from pathlib import Path

    import torch
    from torch.utils.data import DataLoader, TensorDataset

    from trainkit import Trainer, TrainModule
    from trainkit.utilities import rank_zero_info, rank_zero_only

    AT_IMPORT = rank_zero_only.rank
    rank_zero_info(f"logged before the Trainer by RANK={os.environ.get('RANK')}")
    OUT = Path(sys.argv[1])


    class Model(TrainModule):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(2, 1)

        def on_fit_start(self):
            seen = f"{AT_IMPORT} {rank_zero_only.rank}"
            (OUT / f"rank{self.global_rank}.txt").write_text(seen)

        def training_step(self, batch, batch_idx):
            return self.layer(batch[0]).sum()

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)


    if __name__ == "__main__":
        loader = DataLoader(TensorDataset(torch.randn(8, 2)), batch_size=2)
        trainer = Trainer(
            accelerator="cpu", devices=2, strategy="ddp", max_steps=1, logger=False,
            enable_checkpointing=False, enable_progress_bar=False, default_root_dir=str(OUT),
        )
        trainer.fit(Model(), loader)
    """
)


@pytest.mark.distributed
@pytest.mark.timeout(120)
def test_each_rank_knows_its_rank_from_import_on(tmp_path):
    script = tmp_path / "program.py"
    script.write_text(PROGRAM)
    done = subprocess.run(
        [sys.executable, str(script), str(tmp_path)],
        cwd=tmp_path,
        env=cli_env(),
        capture_output=True,
        text=True,
        timeout=110,
    )
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "rank0.txt").read_text() == "0 0"
    assert (tmp_path / "rank1.txt").read_text() == "1 1"
    # the launcher (a pure watcher, docs/strategies.md) runs the top of the program too
    assert "by RANK=0" in done.stdout and "by RANK=1" not in done.stdout
