"""Small modules the tests train: a linear regression, a hook recorder, a failing model."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

from trainkit import TrainModule
from trainkit.demos.autoencoder import AutoEncoder


def regression_data(n: int = 64, features: int = 4, seed: int = 0) -> TensorDataset:
    generator = torch.Generator().manual_seed(seed)
    x = torch.randn(n, features, generator=generator)
    w = torch.arange(1.0, features + 1).unsqueeze(1)
    return TensorDataset(x, x @ w + 0.01 * torch.randn(n, 1, generator=generator))


def regression_loader(
    n: int = 64, batch_size: int = 8, shuffle: bool = False, seed: int = 0
) -> DataLoader:
    return DataLoader(regression_data(n, seed=seed), batch_size=batch_size, shuffle=shuffle)


class Regression(TrainModule):
    """Linear regression with SGD; logs train_loss per step and val/test loss per epoch."""

    def __init__(self, lr: float = 0.05, features: int = 4) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.layer = nn.Linear(features, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer(x)

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y = batch
        loss = F.mse_loss(self(x), y)
        self.log("train_loss", loss, prog_bar=True)
        return loss

    def validation_step(self, batch: Any, batch_idx: int) -> None:
        x, y = batch
        self.log("val_loss", F.mse_loss(self(x), y))

    def test_step(self, batch: Any, batch_idx: int) -> None:
        x, y = batch
        self.log("test_loss", F.mse_loss(self(x), y))

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr)


RECORDED_HOOKS = (
    "setup",
    "teardown",
    "configure_optimizers",
    "training_step",
    "validation_step",
    "on_fit_start",
    "on_fit_end",
    "on_train_start",
    "on_train_end",
    "on_train_epoch_start",
    "on_train_epoch_end",
    "on_train_batch_start",
    "on_train_batch_end",
    "on_validation_start",
    "on_validation_end",
    "on_validation_epoch_start",
    "on_validation_epoch_end",
    "on_validation_batch_start",
    "on_validation_batch_end",
    "on_before_backward",
    "on_after_backward",
    "on_before_optimizer_step",
    "on_before_zero_grad",
    "on_save_checkpoint",
    "on_load_checkpoint",
)


def _recording(name: str):
    def hook(self, *args: Any, **kwargs: Any) -> Any:
        self.calls.append(name)
        return getattr(Regression, name)(self, *args, **kwargs)

    hook.__name__ = name
    return hook


class Recorder(Regression):
    """Records the name of every hook the Trainer calls, in order."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[str] = []


for _name in RECORDED_HOOKS:
    setattr(Recorder, _name, _recording(_name))


class Failing(AutoEncoder):
    """The demo autoencoder that raises (or SIGKILLs itself) on one rank at one batch."""

    def __init__(
        self,
        fail_rank: int = 1,
        fail_step: int = 3,
        how: str = "raise",
        marker: str | None = None,
        **kwargs: Any,
    ) -> None:
        """``marker``: a file created when the failing rank reaches its failure (a readiness
        signal for tests that act on a job in that state)."""
        super().__init__(**kwargs)
        self.fail_rank, self.fail_step, self.how = fail_rank, fail_step, how
        self.marker = marker

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        if self.global_rank == self.fail_rank and batch_idx == self.fail_step:
            if self.marker:
                Path(self.marker).touch()
            if self.how == "raise":
                raise ValueError("boom on purpose")
            if self.how == "hang":
                import time

                time.sleep(600)
            os.kill(os.getpid(), 9)
        return super().training_step(batch, batch_idx)


class Noisy(AutoEncoder):
    """The demo autoencoder with a library that insists on warning at every step."""

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("always")
            warnings.warn("old_api is deprecated; use new_api", FutureWarning, stacklevel=1)
        return super().training_step(batch, batch_idx)


class SlowStart(AutoEncoder):
    """The demo autoencoder whose ranks (not the launcher) linger in start-up, after creating
    ``marker`` + their local rank: a job that is reliably still starting."""

    def __init__(self, marker: str = "", linger_s: float = 60.0, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        local_rank = os.environ.get("LOCAL_RANK")
        if marker and local_rank is not None:
            import time

            Path(f"{marker}{local_rank}").touch()
            time.sleep(linger_s)
