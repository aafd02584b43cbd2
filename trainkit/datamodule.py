"""DataModule: where a dataset is downloaded, split and turned into DataLoaders."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any, Self

from trainkit.checkpoint.from_checkpoint import restricted_classmethod
from trainkit.hparams import HyperparametersMixin

if TYPE_CHECKING:
    import torch
    from torch.serialization import MAP_LOCATION
    from torch.utils.data import Dataset


class DataModule(HyperparametersMixin):
    """Subclass this: ``prepare_data`` once per node, ``setup`` on every rank, then loaders."""

    name: str | None = None  # Lightning's optional name of the data set
    CHECKPOINT_HYPER_PARAMS_KEY = "datamodule_hyper_parameters"
    CHECKPOINT_HYPER_PARAMS_NAME = "datamodule_hparams_name"
    CHECKPOINT_HYPER_PARAMS_TYPE = "datamodule_hparams_type"

    def __init__(self) -> None:
        self.trainer: Any = None
        self.prepare_data_per_node = True  # False: prepare_data on global rank 0 only

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

    def on_before_batch_transfer(self, batch: Any, dataloader_idx: int) -> Any:
        """Change a batch before it moves to the device (used instead of the module's)."""
        return batch

    def transfer_batch_to_device(
        self, batch: Any, device: torch.device, dataloader_idx: int
    ) -> Any:
        """Move ``batch`` to ``device`` (override to move custom batch types; used instead of
        the module's)."""
        from trainkit.data import move_to_device

        return move_to_device(batch, device)

    def on_after_batch_transfer(self, batch: Any, dataloader_idx: int) -> Any:
        """Change a batch on the device (used instead of the module's)."""
        return batch

    def on_exception(self, exception: BaseException) -> None:
        """Called when a stage fails, after the callbacks' ``on_exception``."""

    def state_dict(self) -> dict[str, Any]:
        """Extra state to store in checkpoints."""
        return {}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Restore what ``state_dict`` returned."""

    @classmethod
    def from_datasets(
        cls,
        train_dataset: Dataset | Iterable[Dataset] | None = None,
        val_dataset: Dataset | Iterable[Dataset] | None = None,
        test_dataset: Dataset | Iterable[Dataset] | None = None,
        predict_dataset: Dataset | Iterable[Dataset] | None = None,
        batch_size: int = 1,
        num_workers: int = 0,
        **datamodule_kwargs: Any,
    ) -> Self:
        """A data module whose loaders serve these datasets (a dict or list of datasets: one
        loader each; training loaders shuffle); ``datamodule_kwargs`` (and ``batch_size``,
        ``num_workers`` where ``cls`` takes them) go to ``cls``."""
        sizes = {"batch_size": batch_size, "num_workers": num_workers}
        params = inspect.signature(cls.__init__).parameters
        takes_any = any(p.kind is p.VAR_KEYWORD for p in params.values())
        data = cls(
            **datamodule_kwargs, **{k: v for k, v in sizes.items() if takes_any or k in params}
        )
        given = {"train": train_dataset, "val": val_dataset, "test": test_dataset}
        given["predict"] = predict_dataset
        for kind, datasets in given.items():
            if datasets is not None:
                serve = functools.partial(loaders_of, datasets, kind == "train", **sizes)
                setattr(data, f"{kind}_dataloader", serve)
        return data

    @restricted_classmethod
    def load_from_checkpoint(
        cls,
        checkpoint_path: str,
        map_location: MAP_LOCATION = None,
        hparams_file: str | None = None,
        weights_only: bool | None = None,
        **kwargs: Any,
    ) -> Self:
        """Build the data module from a checkpoint's hyperparameters (or ``hparams_file``),
        updated by ``kwargs``, and give it the state it saved."""
        from trainkit.checkpoint.from_checkpoint import build_from_checkpoint

        key = cls.CHECKPOINT_HYPER_PARAMS_KEY
        where = (checkpoint_path, key, map_location, hparams_file, weights_only, kwargs)
        data, checkpoint = build_from_checkpoint(cls, *where)
        state = checkpoint.get("datamodule_state")
        if isinstance(state, Mapping):
            data.load_state_dict(dict(state))
        return data


def loaders_of(datasets: Any, shuffle: bool, batch_size: int, num_workers: int) -> Any:
    """A DataLoader for a dataset, or a dict/list of them for a dict/list of datasets (an
    iterable dataset is never shuffled)."""
    from torch.utils.data import DataLoader, IterableDataset

    if isinstance(datasets, Mapping):
        return {k: loaders_of(d, shuffle, batch_size, num_workers) for k, d in datasets.items()}
    if isinstance(datasets, list | tuple):
        return [loaders_of(d, shuffle, batch_size, num_workers) for d in datasets]
    shuffle = shuffle and not isinstance(datasets, IterableDataset)
    return DataLoader(datasets, batch_size=batch_size, shuffle=shuffle, num_workers=num_workers)


LightningDataModule = (
    DataModule  # Lightning's name, so ``import trainkit as pl`` code runs unchanged
)
