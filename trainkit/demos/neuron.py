"""The one-neuron toy for batch-size and learning-rate scaling (see scripts/ddp_sandbox.py).

A weight initialised to 1 maps inputs of 1 to targets of 0 under an L1 loss with plain SGD, so each
optimizer step moves it by exactly ``lr`` (deterministic variant). ``experiments`` independent
neurons train side by side in one run; the noisy variant adds Gaussian noise to inputs and targets
and reports the variance of the update step, averaged over the experiments.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from trainkit.datamodule import DataModule
from trainkit.module import TrainModule


class NeuronData(DataModule):
    """Inputs 1, targets 0 (plus optional noise), one column per experiment."""

    def __init__(
        self,
        num_samples: int = 256,
        batch_size: int = 128,
        experiments: int = 1,
        noise: float = 0.0,
        data_seed: int = 0,
    ) -> None:
        """
        Args:
            num_samples: Samples in the epoch.
            batch_size: Samples per batch on each device.
            experiments: Independent neurons trained at once (each gets its own noise).
            noise: Standard deviation of the Gaussian noise on inputs and targets (0: deterministic).
            data_seed: Seed of the noise.
        """
        super().__init__()
        self.save_hyperparameters()
        self.dataset: TensorDataset | None = None

    def setup(self, stage: str) -> None:
        h = self.hparams
        generator = torch.Generator().manual_seed(h.data_seed)
        shape = (h.num_samples, h.experiments)
        inputs = torch.ones(shape) + h.noise * torch.randn(shape, generator=generator)
        targets = h.noise * torch.randn(shape, generator=generator)
        self.dataset = TensorDataset(inputs, targets)

    def train_dataloader(self) -> DataLoader:
        if self.dataset is None:
            raise RuntimeError("the dataset is made in setup(); call setup(stage) first")
        return DataLoader(self.dataset, batch_size=self.hparams.batch_size, shuffle=False)


class Neuron(TrainModule):
    """``y = w * x`` with ``w`` starting at 1; L1 loss to the target; SGD."""

    def __init__(self, lr: float = 1e-3, experiments: int = 1) -> None:
        """
        Args:
            lr: SGD learning rate (before any lr_scaling rule).
            experiments: Independent neurons; must match the data's experiments.
        """
        super().__init__()
        self.save_hyperparameters()
        self.w = nn.Parameter(torch.ones(experiments, dtype=torch.float64))
        self._before = self.w.detach().clone()  # the weights before the current step
        self.updates: list[torch.Tensor] = []

    def training_step(self, batch: list[torch.Tensor], batch_idx: int) -> torch.Tensor:
        inputs, targets = (t.to(torch.float64) for t in batch)
        # mean over the batch of each experiment's L1 loss; experiments are summed so they stay independent
        return (self.w * inputs - targets).abs().mean(0).sum()

    def on_train_batch_start(self, batch: list[torch.Tensor], batch_idx: int) -> None:
        self._before = self.w.detach().clone()

    def on_train_batch_end(
        self, outputs: torch.Tensor, batch: list[torch.Tensor], batch_idx: int
    ) -> None:
        self.updates.append(self._before - self.w.detach())

    def on_train_epoch_end(self) -> None:
        updates = torch.stack(self.updates)  # steps x experiments
        variance = (
            updates.var(dim=0, unbiased=False).mean() if len(updates) > 1 else torch.zeros(())
        )
        self.log("weight", self.w.detach().mean().float())
        self.log("update_variance", variance.float())
        self.print(
            f"neuron: weight={self.w.detach().mean().item():.10f} "
            f"update_variance={variance.item():.4e} steps={len(updates)}"
        )

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=self.hparams.lr)
