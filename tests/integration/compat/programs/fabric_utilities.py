"""A Trainer program that imports Lightning Fabric's utilities, as many do: the seed, moving a
custom batch to the device, rank-zero printing, saving and loading extra state at an fsspec
path, AttributeDict, PossibleUserWarning.  Usage: fabric_utilities.py"""

import warnings

import torch
from torch import nn
from torch.utils.data import DataLoader, Dataset

import trainkit as pl  # under Lightning: import lightning.pytorch as pl
from tests.integration.compat.ported import write_result

# under Lightning: from lightning.fabric.utilities... (or lightning_fabric.utilities...)
from trainkit.fabric.utilities import AttributeDict, rank_zero_only
from trainkit.fabric.utilities.apply_func import convert_tensors_to_scalars, move_data_to_device
from trainkit.fabric.utilities.cloud_io import _atomic_save, _load, get_filesystem
from trainkit.fabric.utilities.seed import seed_everything
from trainkit.fabric.utilities.types import _PATH
from trainkit.fabric.utilities.warnings import PossibleUserWarning

warnings.filterwarnings("ignore", category=PossibleUserWarning)


class Pair:
    """A batch class of the user's: moved by its own ``to``."""

    def __init__(self, x: torch.Tensor, y: torch.Tensor) -> None:
        self.x, self.y = x, y

    def to(self, device):
        return Pair(self.x.to(device), self.y.to(device))


class Pairs(Dataset):
    def __init__(self) -> None:
        generator = torch.Generator().manual_seed(2)
        self.x = torch.randn(64, 4, generator=generator)
        self.y = self.x.sum(1, keepdim=True)

    def __len__(self) -> int:
        return 64

    def __getitem__(self, index: int):
        return self.x[index], self.y[index]


def collate(items) -> Pair:
    return Pair(torch.stack([x for x, _ in items]), torch.stack([y for _, y in items]))


class Regressor(pl.LightningModule):
    def __init__(self, settings: AttributeDict) -> None:
        super().__init__()
        self.settings = settings
        self.net = nn.Linear(4, 1)

    def transfer_batch_to_device(self, batch, device, dataloader_idx):
        return move_data_to_device(batch, device)

    def training_step(self, batch: Pair, batch_idx):
        loss = nn.functional.mse_loss(self.net(batch.x), batch.y)
        self.log("train_loss", loss, on_epoch=True, batch_size=len(batch.x))
        return loss

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.settings.lr)


@rank_zero_only
def save_extra(path: _PATH, state: dict) -> None:
    get_filesystem(path).makedirs(str(path).rpartition("/")[0], exist_ok=True)
    _atomic_save(state, path)


def main() -> None:
    seed = seed_everything(7, workers=False, verbose=False)
    model = Regressor(AttributeDict(lr=0.05))
    loader = DataLoader(Pairs(), batch_size=16, shuffle=True, collate_fn=collate)
    trainer = pl.Trainer(
        max_epochs=3,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        accelerator="cpu",
        devices=1,
    )
    trainer.fit(model, loader)
    path = "memory://extra/state.pt"
    save_extra(path, {"weight": model.net.weight.detach(), "epochs": trainer.current_epoch})
    loaded = _load(path, map_location="cpu", weights_only=True)
    write_result(
        trainer,
        seed=seed,
        loaded=convert_tensors_to_scalars({"epochs": torch.tensor(loaded["epochs"])}),
        weight_sum=float(loaded["weight"].sum()),
    )


if __name__ == "__main__":
    main()
