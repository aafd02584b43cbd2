"""CombinedLoader: its four modes, and loaders read together by the Trainer (a CombinedLoader, a
dict or a list from ``train_dataloader``; several evaluation loaders one after another)."""

from __future__ import annotations

import importlib.util

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, DistributedSampler, IterableDataset, TensorDataset

from trainkit import TrainModule
from trainkit.errors import ConfigError
from trainkit.trainer.loaders import prepare_loaders
from trainkit.utilities import CombinedLoader
from trainkit.utilities.combined_loader import sized_len


def loaders() -> dict[str, DataLoader]:
    return {"a": DataLoader(range(6), batch_size=4), "b": DataLoader(range(15), batch_size=5)}


def steps(combined: CombinedLoader) -> list[tuple[object, int, int]]:
    def plain(batch: object) -> object:
        if isinstance(batch, dict):
            return {key: plain(value) for key, value in batch.items()}
        if isinstance(batch, list | tuple):
            return type(batch)(plain(value) for value in batch)
        return None if batch is None else batch.tolist()

    return [(plain(batch), batch_idx, loader_idx) for batch, batch_idx, loader_idx in combined]


def test_min_size_stops_with_the_shortest():
    combined = CombinedLoader(loaders(), "min_size")
    assert len(combined) == 2
    assert steps(combined) == [
        ({"a": [0, 1, 2, 3], "b": [0, 1, 2, 3, 4]}, 0, 0),
        ({"a": [4, 5], "b": [5, 6, 7, 8, 9]}, 1, 0),
    ]


def test_max_size_cycle_starts_the_shorter_ones_over():
    combined = CombinedLoader(loaders(), "max_size_cycle")
    assert len(combined) == 3
    assert steps(combined)[2] == ({"a": [0, 1, 2, 3], "b": [10, 11, 12, 13, 14]}, 2, 0)


def test_max_size_gives_none_for_the_finished_ones():
    combined = CombinedLoader(loaders(), "max_size")
    assert len(combined) == 3
    assert steps(combined)[2] == ({"a": None, "b": [10, 11, 12, 13, 14]}, 2, 0)


def test_sequential_reads_one_after_another_with_each_loaders_index():
    combined = CombinedLoader(loaders(), "sequential")
    assert len(combined) == 5
    assert [(idx, loader) for _, idx, loader in steps(combined)] == [
        (0, 0), (1, 0), (0, 1), (1, 1), (2, 1),
    ]  # fmt: skip


def test_limits_shape_and_flattened_loaders():
    combined = CombinedLoader([loaders()["a"], (loaders()["b"],)], "max_size")
    combined.limits = [1, 2]
    assert len(combined) == 2
    assert steps(combined) == [
        ([[0, 1, 2, 3], ([0, 1, 2, 3, 4],)], 0, 0),
        ([None, ([5, 6, 7, 8, 9],)], 1, 0),
    ]
    replacement = DataLoader(range(2), batch_size=1)
    combined.flattened = [replacement, combined.flattened[1]]
    assert combined.iterables[0] is replacement and isinstance(combined.iterables[1], tuple)
    assert combined.sampler[0] is replacement.sampler
    with pytest.raises(ValueError, match="expected 2"):
        combined.flattened = [replacement]
    with pytest.raises(ValueError, match="expected one number or 2"):
        combined.limits = [1, 2, 3]
    with pytest.raises(ValueError, match="expected one of"):
        CombinedLoader([], "zip")


def test_a_loader_without_length():
    class Stream(IterableDataset):
        def __iter__(self):
            return iter(range(3))

    combined = CombinedLoader([DataLoader(Stream(), batch_size=2)], "min_size")
    assert sized_len(combined.flattened[0]) is None
    with pytest.raises(TypeError, match="no length"):
        len(combined)
    assert [batch[0].tolist() for batch, _, _ in combined] == [[0, 1], [2]]


@pytest.mark.lightning
@pytest.mark.skipif(importlib.util.find_spec("lightning") is None, reason="needs Lightning")
@pytest.mark.parametrize("mode", ["min_size", "max_size_cycle", "max_size", "sequential"])
def test_every_mode_reads_as_lightnings(mode):
    from lightning.pytorch.utilities import CombinedLoader as LightningCombinedLoader

    theirs = LightningCombinedLoader(loaders(), mode)
    iter(theirs)  # Lightning needs an iterator before len()
    ours = CombinedLoader(loaders(), mode)
    assert len(ours) == len(theirs)
    assert steps(ours) == steps(theirs)


class Recorder(TrainModule):
    """Records the batches each step receives."""

    def __init__(self) -> None:
        super().__init__()
        self.layer = nn.Linear(1, 1)
        self.train_batches: list[object] = []
        self.val_batches: list[tuple[object, int]] = []

    def training_step(self, batch, batch_idx):
        self.train_batches.append(batch)
        return self.layer(torch.ones(1, 1)).sum()

    def validation_step(self, batch, batch_idx, dataloader_idx=0):
        self.val_batches.append((batch, dataloader_idx))

    def predict_step(self, batch, batch_idx):
        return batch

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=0.1)


def numbers(n: int, batch_size: int) -> DataLoader:
    return DataLoader(TensorDataset(torch.arange(n)), batch_size=batch_size)


def test_a_training_step_receives_the_combined_batch(make_trainer):
    model = Recorder()
    combined = CombinedLoader({"a": numbers(4, 2), "b": numbers(6, 2)}, "max_size_cycle")
    trainer = make_trainer(max_epochs=1)
    trainer.fit(model, combined)
    assert trainer.global_step == 3
    assert [batch["a"][0].tolist() for batch in model.train_batches] == [[0, 1], [2, 3], [0, 1]]
    assert [batch["b"][0].tolist() for batch in model.train_batches] == [[0, 1], [2, 3], [4, 5]]


def test_a_list_of_training_loaders_is_read_together_as_lightning_does(make_trainer):
    model = Recorder()
    make_trainer(max_epochs=1).fit(model, [numbers(2, 2), numbers(4, 2)])
    assert len(model.train_batches) == 2 and isinstance(model.train_batches[0], list)
    assert model.train_batches[1][0][0].tolist() == [0, 1]  # the shorter one started over


def test_a_dict_of_validation_loaders_runs_one_after_another(make_trainer):
    model = Recorder()
    val = {"first": numbers(2, 2), "second": numbers(4, 2)}
    make_trainer(max_epochs=1, limit_train_batches=1).fit(model, numbers(2, 2), val)
    assert [(batch[0].tolist(), idx) for batch, idx in model.val_batches] == [
        ([0, 1], 0), ([0, 1], 1), ([2, 3], 1),
    ]  # fmt: skip


def test_validation_may_read_loaders_together(make_trainer):
    model = Recorder()
    val = CombinedLoader({"x": numbers(2, 2), "y": numbers(2, 2)}, "min_size")
    make_trainer(max_epochs=1, limit_train_batches=1).fit(model, numbers(2, 2), val)
    ((batch, idx),) = model.val_batches
    assert set(batch) == {"x", "y"} and idx == 0


def test_modes_a_stage_cannot_read_are_refused(make_trainer):
    with pytest.raises(ConfigError, match="training CombinedLoader's mode 'sequential'"):
        make_trainer(max_epochs=1).fit(Recorder(), CombinedLoader([numbers(2, 2)], "sequential"))
    with pytest.raises(ConfigError, match="prediction CombinedLoader's mode 'min_size'"):
        make_trainer().predict(Recorder(), CombinedLoader([numbers(2, 2)], "min_size"))


class TwoRanks:
    """The two things prepare_loaders asks a strategy, as rank 0 of 2 would answer."""

    world_size = 2

    def distributed_sampler_kwargs(self) -> dict[str, int]:
        return {"num_replicas": 2, "rank": 0}


def test_each_loader_read_together_gets_a_distributed_sampler():
    combined = CombinedLoader({"a": numbers(8, 2), "b": numbers(4, 2)}, "max_size_cycle")
    (ready,) = prepare_loaders(combined, "train", TwoRanks(), True, "per_device")  # type: ignore[arg-type]
    samplers = [loader.sampler for loader in ready.flattened]
    assert all(isinstance(sampler, DistributedSampler) for sampler in samplers)
    assert len(ready) == 2  # 8 samples, half on this rank, 2 a batch
