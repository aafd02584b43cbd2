"""After Lightning's ``examples/pytorch/basics/backbone_image_classifier.py``
(github.com/Lightning-AI/pytorch-lightning): the same Lightning surface, written here in our own
words (this repository holds no copy of public code) and with a synthetic data set.

What it keeps from the example: ``cli_lightning_logo()`` at start, the torchvision check through
``utilities.imports._TORCHVISION_AVAILABLE``, a LightningCLI with ``run=False``,
``seed_everything_default`` and ``save_config_kwargs={"overwrite": True}``; a model whose
``__init__`` takes an ``nn.Module`` (``backbone: Backbone | None = None``, left out of the
hyperparameters with ``save_hyperparameters(ignore=["backbone"])``) and reads
``self.hparams.learning_rate``; ``self.log(on_epoch=True)`` in training and ``on_step=True`` in
validation; ``predict_step(batch, batch_idx, dataloader_idx=None)``; a data module that builds
and splits its sets in ``__init__`` (``random_split`` with its own generator) and gives all four
loaders; then ``fit``, ``test(ckpt_path="best")`` and ``predict(ckpt_path="best")``.
What differs: 28x28 one-channel "digits" drawn from ten fixed templates plus noise, 640 images
instead of MNIST's 70,000 (no download), and a ``write_result`` call for the test.

Usage: backbone_classifier.py [--trainer.max_epochs N] [--model.learning_rate LR] ...
"""

import torch
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset, random_split

from tests.integration.compat.ported import write_result
from trainkit import LightningDataModule, LightningModule, cli_lightning_logo
from trainkit.cli import LightningCLI
from trainkit.utilities.imports import _TORCHVISION_AVAILABLE


def synthetic_digits(count: int, seed: int) -> TensorDataset:
    """Stands in for MNIST (``transforms.ToTensor()`` images: 1x28x28 in [0, 1], labels 0-9)."""
    templates = torch.rand(10, 1, 28, 28, generator=torch.Generator().manual_seed(0))
    generator = torch.Generator().manual_seed(seed)
    labels = torch.randint(0, 10, (count,), generator=generator)
    noise = 0.3 * torch.rand(count, 1, 28, 28, generator=generator)
    return TensorDataset((0.7 * templates[labels] + noise).clamp(0, 1), labels)


class Backbone(torch.nn.Module):
    """Two linear layers over the flattened image."""

    def __init__(self, hidden_dim: int = 128) -> None:
        super().__init__()
        self.l1 = torch.nn.Linear(28 * 28, hidden_dim)
        self.l2 = torch.nn.Linear(hidden_dim, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hidden = torch.relu(self.l1(x.flatten(1)))
        return torch.relu(self.l2(hidden))


class LitClassifier(LightningModule):
    def __init__(self, backbone: Backbone | None = None, learning_rate: float = 0.0001) -> None:
        super().__init__()
        self.save_hyperparameters(ignore=["backbone"])
        self.backbone = backbone if backbone is not None else Backbone()

    def forward(self, x):
        return self.backbone(x)

    def training_step(self, batch, batch_idx):
        images, labels = batch
        loss = F.cross_entropy(self(images), labels)
        self.log("train_loss", loss, on_epoch=True)
        return loss

    def validation_step(self, batch, batch_idx):
        images, labels = batch
        self.log("valid_loss", F.cross_entropy(self(images), labels), on_step=True)

    def test_step(self, batch, batch_idx):
        images, labels = batch
        self.log("test_loss", F.cross_entropy(self(images), labels))

    def predict_step(self, batch, batch_idx, dataloader_idx=None):
        images, _ = batch
        return self(images)

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=self.hparams.learning_rate)


class MyDataModule(LightningDataModule):
    def __init__(self, batch_size: int = 32) -> None:
        super().__init__()
        dataset = synthetic_digits(512, seed=1)
        self.digits_test = synthetic_digits(128, seed=2)
        self.digits_train, self.digits_val = random_split(
            dataset, [448, 64], generator=torch.Generator().manual_seed(42)
        )
        self.batch_size = batch_size

    def train_dataloader(self):
        return DataLoader(self.digits_train, batch_size=self.batch_size)

    def val_dataloader(self):
        return DataLoader(self.digits_val, batch_size=self.batch_size)

    def test_dataloader(self):
        return DataLoader(self.digits_test, batch_size=self.batch_size)

    def predict_dataloader(self):
        return DataLoader(self.digits_test, batch_size=self.batch_size)


def cli_main() -> None:
    cli = LightningCLI(
        LitClassifier,
        MyDataModule,
        seed_everything_default=1234,
        save_config_kwargs={"overwrite": True},
        run=False,
    )
    cli.trainer.fit(cli.model, datamodule=cli.datamodule)
    fit_metrics = {name: float(value) for name, value in cli.trainer.callback_metrics.items()}
    tested = cli.trainer.test(ckpt_path="best", datamodule=cli.datamodule)
    test_metrics = {name: float(value) for name, value in cli.trainer.callback_metrics.items()}
    predictions = cli.trainer.predict(ckpt_path="best", datamodule=cli.datamodule)
    print(predictions[0])
    write_result(
        cli.trainer,
        fit=fit_metrics,
        test=test_metrics,
        tested=[{name: float(value) for name, value in run.items()} for run in tested],
        predictions=[list(batch.shape) for batch in predictions],
        prediction_sum=float(sum(batch.double().sum() for batch in predictions)),
        hparams=dict(cli.model.hparams),
        best=cli.trainer.checkpoint_callback.best_model_path.rpartition("/")[2],
        log_dir=cli.trainer.log_dir,
        torchvision=bool(_TORCHVISION_AVAILABLE),
    )


if __name__ == "__main__":
    cli_lightning_logo()
    cli_main()
