"""DataModule: where a dataset is downloaded, split and turned into DataLoaders."""

from __future__ import annotations

import inspect
from typing import Any

from trainkit.hparams import AttributeDict, collect_init_args, select_hparams


class DataModule:
    """Subclass this: ``prepare_data`` once per node, ``setup`` on every rank, then loaders."""

    def __init__(self) -> None:
        self.trainer: Any = None
        self._hparams = AttributeDict()

    def prepare_data(self) -> None:
        """Download or write files; runs on local rank 0 of each node, others wait."""

    def setup(self, stage: str) -> None:
        """Build datasets on every rank; ``stage`` is fit, validate, test or predict."""

    def teardown(self, stage: str) -> None:
        """Release what ``setup`` built."""

    def train_dataloader(self) -> Any:
        """The DataLoader used by ``fit``."""
        raise NotImplementedError(f"{type(self).__name__} defines no train_dataloader")

    def val_dataloader(self) -> Any:
        """The DataLoader used for validation (optional)."""
        return None

    def test_dataloader(self) -> Any:
        """The DataLoader used by ``test``."""
        raise NotImplementedError(f"{type(self).__name__} defines no test_dataloader")

    def predict_dataloader(self) -> Any:
        """The DataLoader used by ``predict``."""
        raise NotImplementedError(f"{type(self).__name__} defines no predict_dataloader")

    def state_dict(self) -> dict[str, Any]:
        """Extra state to store in checkpoints."""
        return {}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore what ``state_dict`` returned."""

    @property
    def hparams(self) -> AttributeDict:
        return self._hparams

    def save_hyperparameters(
        self, *names: str | dict[str, Any], ignore: str | list[str] | None = None
    ) -> None:
        """Store the ``__init__`` arguments in ``self.hparams`` and checkpoints."""
        frame = inspect.currentframe()
        caller = frame.f_back if frame is not None else None
        init_args = collect_init_args(caller, self) if caller is not None else {}
        self._hparams = AttributeDict(select_hparams(init_args, names, ignore))


LightningDataModule = (
    DataModule  # Lightning's name, so ``import trainkit as pl`` code runs unchanged
)
