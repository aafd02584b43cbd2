"""A GAN trained with manual optimization, shaped like Lightning's basic GAN example: two
optimizers, toggle_optimizer, two manual_backward calls per step, a positional datamodule and a
training_step without batch_idx.  Usage: gan.py DEVICES"""

import sys

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import trainkit as pl  # under Lightning: import lightning.pytorch as pl
from tests.integration.compat.ported import write_result


class Ring(pl.LightningDataModule):
    """Points on a noisy ring: the distribution the generator learns."""

    def __init__(self, samples: int = 256, batch_size: int = 32) -> None:
        super().__init__()
        self.save_hyperparameters()

    def setup(self, stage: str) -> None:
        generator = torch.Generator().manual_seed(0)
        angle = torch.rand(self.hparams.samples, generator=generator) * 6.2832
        ring = torch.stack([angle.cos(), angle.sin()], dim=1)
        self.points = ring + 0.05 * torch.randn(ring.shape, generator=generator)

    def train_dataloader(self) -> DataLoader:
        return DataLoader(TensorDataset(self.points), batch_size=self.hparams.batch_size)


class GAN(pl.LightningModule):
    def __init__(self, latent_dim: int = 8, lr: float = 2e-3) -> None:
        super().__init__()
        self.save_hyperparameters()
        self.automatic_optimization = False
        self.generator = nn.Sequential(nn.Linear(latent_dim, 32), nn.ReLU(), nn.Linear(32, 2))
        self.discriminator = nn.Sequential(nn.Linear(2, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1))

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.generator(z)

    def adversarial_loss(self, logits: torch.Tensor, real: bool) -> torch.Tensor:
        target = torch.ones_like(logits) if real else torch.zeros_like(logits)
        return F.binary_cross_entropy_with_logits(logits, target)

    def training_step(self, batch):
        (points,) = batch
        opt_g, opt_d = self.optimizers()
        z = torch.randn(points.shape[0], self.hparams.latent_dim, device=self.device)

        self.toggle_optimizer(opt_g)
        g_loss = self.adversarial_loss(self.discriminator(self(z)), real=True)
        self.manual_backward(g_loss)
        opt_g.step()
        opt_g.zero_grad()
        self.untoggle_optimizer(opt_g)

        self.toggle_optimizer(opt_d)
        real_loss = self.adversarial_loss(self.discriminator(points), real=True)
        fake_loss = self.adversarial_loss(self.discriminator(self(z).detach()), real=False)
        d_loss = (real_loss + fake_loss) / 2
        self.manual_backward(d_loss)
        opt_d.step()
        opt_d.zero_grad()
        self.untoggle_optimizer(opt_d)

        self.log_dict({"g_loss": g_loss, "d_loss": d_loss}, prog_bar=True, sync_dist=True)

    def configure_optimizers(self):
        lr = self.hparams.lr
        opt_g = torch.optim.Adam(self.generator.parameters(), lr=lr, betas=(0.5, 0.999))
        opt_d = torch.optim.Adam(self.discriminator.parameters(), lr=lr, betas=(0.5, 0.999))
        return [opt_g, opt_d], []


def main() -> None:
    pl.seed_everything(0)
    trainer = pl.Trainer(
        accelerator="cpu",
        devices=int(sys.argv[1]),
        max_epochs=3,
        enable_progress_bar=False,
        enable_model_summary=False,
        logger=False,
        enable_checkpointing=False,
    )
    model = GAN()
    trainer.fit(model, Ring())
    # every rank must end with the same weights: the gradients of both losses were averaged
    checksum = torch.stack([p.detach().double().sum() for p in model.parameters()]).sum()
    write_result(trainer, checksums=model.all_gather(checksum).reshape(-1).tolist())


if __name__ == "__main__":
    main()
