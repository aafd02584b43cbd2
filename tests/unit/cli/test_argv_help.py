"""``trainkit fit -c config.yaml --help`` in a user's project: the configured model's class
and docstring."""

from __future__ import annotations

import textwrap

import pytest

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


@pytest.fixture
def project(tmp_path):
    """A user's project folder: a package ``myproj`` and ``config.yaml``, nothing installed."""
    (tmp_path / "myproj").mkdir()
    (tmp_path / "myproj" / "__init__.py").write_text(PACKAGE)
    (tmp_path / "config.yaml").write_text(CONFIG)
    return tmp_path


def test_help_with_a_config_shows_the_configured_model_and_its_docstring(project, run_main):
    result = run_main("fit", "-c", "config.yaml", "--help")  # in project, the test's folder
    assert result.returncode == 0, result.stderr
    assert "model: myproj.Line (from your config)" in result.stdout
    assert "A straight line through four inputs" in result.stdout
    assert "How many inputs the line takes." in result.stdout
