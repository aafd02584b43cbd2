"""A new user's project as the first-hour tests write it: a package ``myproj`` with one module
class, and ``config.yaml`` beside it, nothing installed."""

from __future__ import annotations

import textwrap
from pathlib import Path

PACKAGE = textwrap.dedent("""
    import torch
    from torch.nn import functional as F
    from torch.utils.data import DataLoader, TensorDataset
    import trainkit as tk


    class Line(tk.TrainModule):
        '''A straight line through four inputs.'''

        def __init__(self, width: int = 4) -> None:
            '''
            Args:
                width: How many inputs the line takes.
            '''
            super().__init__()
            self.layer = torch.nn.Linear(width, 1)

        def training_step(self, batch, batch_idx):
            x, y = batch
            return F.mse_loss(self.layer(x), y)

        def train_dataloader(self):
            x = torch.randn(32, 4)
            return DataLoader(TensorDataset(x, x.sum(1, keepdim=True)), batch_size=8)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)
""")


CONFIG = textwrap.dedent("""
    model:
      class_path: myproj.Line
    trainer:
      max_epochs: 1
      enable_progress_bar: false
""")


def make_project(folder: Path) -> Path:
    """Write the project into ``folder``; returns it."""
    (folder / "myproj").mkdir()
    (folder / "myproj" / "__init__.py").write_text(PACKAGE)
    (folder / "config.yaml").write_text(CONFIG)
    return folder
