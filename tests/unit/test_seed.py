"""seed_everything: the same seed gives the same weights and the same batches (workers too)."""

from __future__ import annotations

import torch
from torch.utils.data import DataLoader, Dataset

from tests.helpers.models import Regression, regression_loader
from trainkit import seed_everything
from trainkit.data import prepare_loader


def trained_weights(make_trainer, seed):
    seed_everything(seed)
    model = Regression()
    make_trainer(max_epochs=2).fit(model, regression_loader(shuffle=True))
    return model.layer.weight.detach().clone()


def test_same_seed_same_weights_different_seed_different_weights(make_trainer):
    assert torch.equal(trained_weights(make_trainer, 5), trained_weights(make_trainer, 5))
    assert not torch.equal(trained_weights(make_trainer, 5), trained_weights(make_trainer, 6))


class RandomItems(Dataset):
    def __len__(self):
        return 8

    def __getitem__(self, index):
        return torch.rand(1)


def batches(seed):
    seed_everything(seed, workers=True)
    loader = prepare_loader(
        DataLoader(RandomItems(), batch_size=2, num_workers=2), None, True, True
    )
    return torch.cat(list(loader))


def test_worker_seeding_makes_worker_randomness_reproducible():
    first, second = batches(11), batches(11)
    assert torch.equal(first, second)
    assert len(set(first.flatten().tolist())) == 8  # workers do not repeat each other
