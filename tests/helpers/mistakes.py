"""Classes with the mistakes new users make, for the errors-that-teach table."""

from __future__ import annotations

import torch
from torch.utils.data import DataLoader, TensorDataset

from trainkit import DataModule, TrainModule


class Picky(TrainModule):
    """Rejects a value in its own ``__init__`` with a message of its own."""

    def __init__(self, width: int = 4) -> None:
        super().__init__()
        if width > 100:
            raise ValueError(f"width {width} is too wide for this toy; use at most 100")
        self.layer = torch.nn.Linear(width, 1)

    def training_step(self, batch, batch_idx):
        return self.layer(batch[0]).sum()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


class TrainsOnly(TrainModule):
    """A module with training_step and nothing else: no test/validation/predict step, no forward."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(32, 1)

    def training_step(self, batch, batch_idx):
        return self.layer(batch[0]).pow(2).mean()

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


class OnlyTrainData(DataModule):
    """A DataModule with a train loader only."""

    def train_dataloader(self):
        return DataLoader(TensorDataset(torch.randn(64, 32)), batch_size=8)


class ForgetsTheLoss(TrainsOnly):
    """training_step computes the loss and forgets to return it."""

    def training_step(self, batch, batch_idx):
        self.layer(batch[0]).pow(2).mean()


class LogsAVector(TrainsOnly):
    """self.log of a per-sample tensor instead of a number."""

    def training_step(self, batch, batch_idx):
        out = self.layer(batch[0])
        self.log("per_sample", out.squeeze(1))
        return out.pow(2).mean()


class LoaderReturnsNone(TrainsOnly):
    """train_dataloader builds a loader and forgets to return it."""

    def train_dataloader(self):
        x = torch.randn(16, 32)
        DataLoader(TensorDataset(x), batch_size=4)


class WaitsInTeardown(TrainsOnly):
    """Marks ``<folder>/training`` at its first step, then, in teardown (after a preempted fit
    has saved and closed its signal watch), marks ``teardown`` and waits for ``release``."""

    def __init__(self, folder: str = ".") -> None:
        super().__init__()
        self.folder = folder

    def training_step(self, batch, batch_idx):
        import pathlib
        import time

        pathlib.Path(self.folder, "training").touch()
        time.sleep(0.05)  # steps slow enough for a signal to land mid-fit
        return super().training_step(batch, batch_idx)

    def train_dataloader(self):
        x = torch.randn(4096, 32)
        return DataLoader(TensorDataset(x), batch_size=4)

    def teardown(self, stage):
        import pathlib
        import time

        folder = pathlib.Path(self.folder)
        (folder / "teardown").touch()
        deadline = time.monotonic() + 120
        while not (folder / "release").exists() and time.monotonic() < deadline:
            time.sleep(0.01)


class ReadsAMisspelledKey(TrainsOnly):
    """Its own ``__init__`` looks up a key it misspelled (a KeyError in the user's code)."""

    def __init__(self, hidden: int = 4) -> None:
        super().__init__()
        sizes = {"hidden": hidden}
        self.head = torch.nn.Linear(32, sizes["hiden"])


class ForgetsSuperInit(TrainModule):
    """Assigns a layer before calling ``super().__init__()``."""

    def __init__(self, hidden: int = 4) -> None:
        self.layer = torch.nn.Linear(32, hidden)

    def training_step(self, batch, batch_idx):
        return self.layer(batch[0]).sum()


class MovesItselfToCuda(TrainsOnly):
    """Calls ``.cuda()`` in its ``__init__`` (on a machine without CUDA)."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(32, 1).cuda()


class NoOptimizer(TrainModule):
    """A module without configure_optimizers (and the config has no optimizer section)."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = torch.nn.Linear(32, 1)

    def training_step(self, batch, batch_idx):
        return self.layer(batch[0]).pow(2).mean()


class LogsEpochWithoutSync(TrainsOnly):
    """Logs an epoch-level validation metric without ``sync_dist`` (each rank's own value)."""

    def validation_step(self, batch, batch_idx):
        self.log("val_unsynced", self.layer(batch[0]).pow(2).mean())

    def train_dataloader(self):
        return DataLoader(TensorDataset(torch.randn(16, 32)), batch_size=4)

    def val_dataloader(self):
        return DataLoader(TensorDataset(torch.randn(8, 32)), batch_size=4)


class CrashesInSetup(TrainsOnly):
    """Its setup hook raises, after the run folder was made (an error in the user's code)."""

    def setup(self, stage):
        raise RuntimeError("setup failed on purpose")
