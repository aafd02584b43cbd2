"""Transfer learning driven by a LightningCLI subclass, shaped like Lightning's
computer_vision_fine_tuning example: a milestone finetuning callback added as its own config
section (add_lightning_class_args), arguments linked between sections at parse time and at
instantiation (data.num_classes -> model.num_classes), defaults set in the parser, and the run
configured by several -c YAML files naming callbacks and loggers by short class name.

Usage: cli_finetune.py fit -c cli_finetune_trainer.yaml -c cli_finetune_model.yaml [--key value]
"""

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import trainkit as pl  # under Lightning: import lightning.pytorch as pl
from tests.integration.compat.ported import write_result
from trainkit.callbacks import BaseFinetuning  # under Lightning: lightning.pytorch.callbacks
from trainkit.cli import LightningCLI  # under Lightning: lightning.pytorch.cli


class FeatureData(pl.LightningDataModule):
    """Gaussian clusters in feature space standing in for a small image data set."""

    def __init__(
        self, num_samples: int = 256, num_features: int = 16, classes: int = 4, batch_size: int = 32
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.num_classes = classes  # read by the CLI after instantiation (a link source)

    def setup(self, stage: str) -> None:
        generator = torch.Generator().manual_seed(0)
        centers = 2.0 * torch.randn(
            self.num_classes, self.hparams.num_features, generator=generator
        )
        labels = torch.arange(self.hparams.num_samples) % self.num_classes
        noise = torch.randn(
            self.hparams.num_samples, self.hparams.num_features, generator=generator
        )
        features = centers[labels] + noise
        split = self.hparams.num_samples * 3 // 4
        self.train_set = TensorDataset(features[:split], labels[:split])
        self.val_set = TensorDataset(features[split:], labels[split:])

    def train_dataloader(self) -> DataLoader:
        return DataLoader(self.train_set, batch_size=self.hparams.batch_size, shuffle=True)

    def val_dataloader(self) -> DataLoader:
        return DataLoader(self.val_set, batch_size=self.hparams.batch_size)


class MilestonesFinetuning(BaseFinetuning):
    """Train the head first; unfreeze the backbone's last layer, then all of it, at milestones."""

    def __init__(self, milestones: tuple = (1, 2), train_bn: bool = False) -> None:
        super().__init__()
        self.milestones = milestones
        self.train_bn = train_bn

    def freeze_before_training(self, pl_module: pl.LightningModule) -> None:
        self.freeze(modules=pl_module.feature_extractor, train_bn=self.train_bn)

    def finetune_function(self, pl_module, epoch: int, optimizer) -> None:
        if epoch == self.milestones[0]:
            self.unfreeze_and_add_param_group(
                modules=pl_module.feature_extractor[-2:],
                optimizer=optimizer,
                train_bn=self.train_bn,
            )
        elif epoch == self.milestones[1]:
            self.unfreeze_and_add_param_group(
                modules=pl_module.feature_extractor[:-2],
                optimizer=optimizer,
                train_bn=self.train_bn,
            )


class TransferLearningModel(pl.LightningModule):
    def __init__(
        self,
        num_classes: int = 2,
        hidden: int = 32,
        lr: float = 1e-2,
        milestones: tuple = (1, 2),
        batch_size: int = 32,
        num_features: int = 16,
    ) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.feature_extractor = nn.Sequential(
            nn.Linear(num_features, hidden),
            nn.ReLU(),
            nn.Linear(hidden, hidden),
            nn.ReLU(),
        )
        self.fc = nn.Linear(hidden, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.feature_extractor(x))

    def training_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        loss = F.cross_entropy(logits, y)
        self.log("train_loss", loss, prog_bar=True)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        self.log("val_loss", F.cross_entropy(logits, y), prog_bar=True)
        self.log("val_acc", (logits.argmax(dim=1) == y).float().mean(), prog_bar=True)

    def configure_optimizers(self):
        trainable = [p for p in self.parameters() if p.requires_grad]
        optimizer = torch.optim.Adam(trainable, lr=self.hparams.lr)
        scheduler = torch.optim.lr_scheduler.MultiStepLR(
            optimizer, milestones=list(self.hparams.milestones), gamma=0.5
        )
        return [optimizer], [scheduler]


class MyLightningCLI(LightningCLI):
    def add_arguments_to_parser(self, parser) -> None:
        parser.add_lightning_class_args(MilestonesFinetuning, "finetuning")
        parser.link_arguments("data.batch_size", "model.batch_size")
        parser.link_arguments("data.num_features", "model.num_features")
        parser.link_arguments("finetuning.milestones", "model.milestones")
        parser.link_arguments("data.num_classes", "model.num_classes", apply_on="instantiate")
        parser.set_defaults(
            {
                "trainer.max_epochs": 3,
                "trainer.enable_model_summary": False,
                "trainer.num_sanity_val_steps": 0,
            }
        )

    def before_fit(self) -> None:
        self.trainable_before_fit = sum(p.requires_grad for p in self.model.parameters())

    def after_fit(self) -> None:
        trainer = self.trainer
        write_result(
            trainer,
            num_classes=self.model.hparams.num_classes,
            milestones=list(self.model.hparams.milestones),
            param_groups=len(trainer.optimizers[0].param_groups),
            finetuning=[
                type(c).__name__ for c in trainer.callbacks if isinstance(c, BaseFinetuning)
            ],
            checkpoint_monitor=trainer.checkpoint_callback.monitor,
            best_model=bool(trainer.checkpoint_callback.best_model_path),
            logger=type(trainer.logger).__name__,
            log_dir=trainer.log_dir,
            trainable_before_fit=self.trainable_before_fit,
            trainable_after_fit=sum(p.requires_grad for p in self.model.parameters()),
        )


def cli_main() -> None:
    MyLightningCLI(TransferLearningModel, FeatureData, seed_everything_default=1234)


if __name__ == "__main__":
    cli_main()
