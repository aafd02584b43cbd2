"""After the UvA deep-learning course's tutorial 5, "Transformers and Multi-Head Attention"
(github.com/Lightning-AI/tutorials, course_UvA-DL/05-transformers-and-MH-attention/
Transformers_MHAttention.py): its sequence-reversal task. The same Lightning surface, written
here in our own words (this repository holds no copy of public code).

What it keeps: ``L.seed_everything(42)`` before the data are drawn from the global generator; a
``TransformerPredictor`` base module (``save_hyperparameters()`` of ten arguments read back
through ``self.hparams``) whose ``configure_optimizers`` returns only the optimizer and keeps a
cosine warm-up ``_LRScheduler`` subclass as ``self.lr_scheduler``, stepped per batch by an
``optimizer_step(*args, **kwargs)`` override that calls ``super().optimizer_step``; a
``ReversePredictor`` subclass logging ``"%s_loss" % mode`` and ``"%s_acc" % mode`` from a shared
``_calculate_loss``; ``Trainer(default_root_dir=..., callbacks=[ModelCheckpoint(
save_weights_only=True, mode="max", monitor="val_acc")], accelerator="auto", devices=1,
max_epochs=..., gradient_clip_val=5)``; ``trainer.logger._default_hp_metric = None``;
``load_from_checkpoint`` of a saved model when one exists, else ``fit(model, train_loader,
val_loader)`` with positional loaders; then ``trainer.test(model, dataloaders=...,
verbose=False)`` on the validation and the test loader, reading ``[0]["test_acc"]``.
What differs: the task's own synthetic data in smaller sets (4,096/256/512 sequences instead of
50,000/1,000/10,000), 4 epochs, a 16-step warm-up instead of 50 and a rate of 5e-3 instead of
5e-4 (so the short run learns), ``torch.nn.MultiheadAttention`` in place of the tutorial's
hand-written attention, and a ``write_result`` call for the test.

Usage: reverse_transformer.py [MAX_EPOCHS]   (a ReverseTask.ckpt in the working folder is loaded)
"""

import math
import os
import sys
from functools import partial

import numpy as np
import torch
import torch.nn.functional as F
import torch.utils.data as data
from torch import nn, optim

import trainkit as L  # under Lightning: import lightning.pytorch as L
from tests.integration.compat.ported import write_result
from trainkit.callbacks import ModelCheckpoint

CHECKPOINT_PATH = os.environ.get("PATH_CHECKPOINT", ".")
L.seed_everything(42)


class PositionalEncoding(nn.Module):
    def __init__(self, d_model: int, max_len: int = 5000) -> None:
        super().__init__()
        position = torch.arange(max_len, dtype=torch.float).unsqueeze(1)
        frequency = torch.exp(torch.arange(0, d_model, 2).float() * (-math.log(10000.0) / d_model))
        table = torch.zeros(max_len, d_model)
        table[:, 0::2] = torch.sin(position * frequency)
        table[:, 1::2] = torch.cos(position * frequency)
        self.register_buffer("pe", table.unsqueeze(0), persistent=False)

    def forward(self, x):
        return x + self.pe[:, : x.size(1)]


class EncoderBlock(nn.Module):
    """Self-attention and a two-layer feed-forward net, each with a residual and a LayerNorm."""

    def __init__(self, input_dim: int, num_heads: int, dim_feedforward: int, dropout: float):
        super().__init__()
        self.self_attn = nn.MultiheadAttention(input_dim, num_heads, batch_first=True)
        self.linear_net = nn.Sequential(
            nn.Linear(input_dim, dim_feedforward),
            nn.Dropout(dropout),
            nn.ReLU(inplace=True),
            nn.Linear(dim_feedforward, input_dim),
        )
        self.norm1 = nn.LayerNorm(input_dim)
        self.norm2 = nn.LayerNorm(input_dim)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, mask=None):
        attended, _ = self.self_attn(x, x, x, attn_mask=mask, need_weights=False)
        x = self.norm1(x + self.dropout(attended))
        return self.norm2(x + self.dropout(self.linear_net(x)))


class TransformerEncoder(nn.Module):
    def __init__(self, num_layers: int, **block_args) -> None:
        super().__init__()
        self.layers = nn.ModuleList([EncoderBlock(**block_args) for _ in range(num_layers)])

    def forward(self, x, mask=None):
        for layer in self.layers:
            x = layer(x, mask=mask)
        return x


class CosineWarmupScheduler(optim.lr_scheduler._LRScheduler):
    def __init__(self, optimizer, warmup, max_iters):
        self.warmup = warmup
        self.max_num_iters = max_iters
        super().__init__(optimizer)

    def get_lr(self):
        factor = self.get_lr_factor(epoch=self.last_epoch)
        return [base_lr * factor for base_lr in self.base_lrs]

    def get_lr_factor(self, epoch):
        factor = 0.5 * (1 + np.cos(np.pi * epoch / self.max_num_iters))
        if epoch <= self.warmup:
            factor *= epoch * 1.0 / self.warmup
        return factor


class TransformerPredictor(L.LightningModule):
    def __init__(
        self,
        input_dim,
        model_dim,
        num_classes,
        num_heads,
        num_layers,
        lr,
        warmup,
        max_iters,
        dropout=0.0,
        input_dropout=0.0,
    ):
        super().__init__()
        self.save_hyperparameters()
        self._create_model()

    def _create_model(self):
        hp = self.hparams
        self.input_net = nn.Sequential(
            nn.Dropout(hp.input_dropout), nn.Linear(hp.input_dim, hp.model_dim)
        )
        self.positional_encoding = PositionalEncoding(d_model=hp.model_dim)
        self.transformer = TransformerEncoder(
            num_layers=hp.num_layers,
            input_dim=hp.model_dim,
            dim_feedforward=2 * hp.model_dim,
            num_heads=hp.num_heads,
            dropout=hp.dropout,
        )
        self.output_net = nn.Sequential(
            nn.Linear(hp.model_dim, hp.model_dim),
            nn.LayerNorm(hp.model_dim),
            nn.ReLU(inplace=True),
            nn.Dropout(hp.dropout),
            nn.Linear(hp.model_dim, hp.num_classes),
        )

    def forward(self, x, mask=None, add_positional_encoding=True):
        x = self.input_net(x)
        if add_positional_encoding:
            x = self.positional_encoding(x)
        return self.output_net(self.transformer(x, mask=mask))

    def configure_optimizers(self):
        optimizer = optim.Adam(self.parameters(), lr=self.hparams.lr)
        # not returned: it steps every batch, from optimizer_step below
        self.lr_scheduler = CosineWarmupScheduler(
            optimizer, warmup=self.hparams.warmup, max_iters=self.hparams.max_iters
        )
        return optimizer

    def optimizer_step(self, *args, **kwargs):
        super().optimizer_step(*args, **kwargs)
        self.lr_scheduler.step()

    def training_step(self, batch, batch_idx):
        raise NotImplementedError

    def validation_step(self, batch, batch_idx):
        raise NotImplementedError

    def test_step(self, batch, batch_idx):
        raise NotImplementedError


class ReverseDataset(data.Dataset):
    def __init__(self, num_categories, seq_len, size):
        super().__init__()
        self.num_categories = num_categories
        self.seq_len = seq_len
        self.size = size
        self.data = torch.randint(self.num_categories, size=(self.size, self.seq_len))

    def __len__(self):
        return self.size

    def __getitem__(self, idx):
        sequence = self.data[idx]
        return sequence, torch.flip(sequence, dims=(0,))


dataset = partial(ReverseDataset, 10, 16)
train_loader = data.DataLoader(
    dataset(4096), batch_size=128, shuffle=True, drop_last=True, pin_memory=True
)
val_loader = data.DataLoader(dataset(256), batch_size=128)
test_loader = data.DataLoader(dataset(512), batch_size=128)


class ReversePredictor(TransformerPredictor):
    def _calculate_loss(self, batch, mode="train"):
        inp_data, labels = batch
        inp_data = F.one_hot(inp_data, num_classes=self.hparams.num_classes).float()
        preds = self.forward(inp_data, add_positional_encoding=True)
        loss = F.cross_entropy(preds.view(-1, preds.size(-1)), labels.view(-1))
        acc = (preds.argmax(dim=-1) == labels).float().mean()
        self.log("%s_loss" % mode, loss)  # noqa: UP031 (as the tutorial writes it)
        self.log("%s_acc" % mode, acc)  # noqa: UP031
        return loss, acc

    def training_step(self, batch, batch_idx):
        loss, _ = self._calculate_loss(batch, mode="train")
        return loss

    def validation_step(self, batch, batch_idx):
        _ = self._calculate_loss(batch, mode="val")

    def test_step(self, batch, batch_idx):
        _ = self._calculate_loss(batch, mode="test")


def train_reverse(max_epochs, **kwargs):
    root_dir = os.path.join(CHECKPOINT_PATH, "ReverseTask")
    os.makedirs(root_dir, exist_ok=True)
    trainer = L.Trainer(
        default_root_dir=root_dir,
        callbacks=[ModelCheckpoint(save_weights_only=True, mode="max", monitor="val_acc")],
        accelerator="auto",
        devices=1,
        max_epochs=max_epochs,
        gradient_clip_val=5,
    )
    trainer.logger._default_hp_metric = None

    pretrained_filename = os.path.join(CHECKPOINT_PATH, "ReverseTask.ckpt")
    if os.path.isfile(pretrained_filename):
        print("Found pretrained model, loading...")
        model = ReversePredictor.load_from_checkpoint(pretrained_filename)
        fit = None
    else:
        model = ReversePredictor(max_iters=trainer.max_epochs * len(train_loader), **kwargs)
        trainer.fit(model, train_loader, val_loader)
        fit = {name: float(value) for name, value in trainer.callback_metrics.items()}

    val_result = trainer.test(model, dataloaders=val_loader, verbose=False)
    test_result = trainer.test(model, dataloaders=test_loader, verbose=False)
    result = {"test_acc": test_result[0]["test_acc"], "val_acc": val_result[0]["test_acc"]}
    write_result(
        trainer,
        fit=fit,
        result=result,
        lr=model.lr_scheduler.get_last_lr()[0] if fit else None,
        steps=trainer.global_step,
        best=os.path.relpath(trainer.checkpoint_callback.best_model_path or ".", CHECKPOINT_PATH),
        hparams={k: v for k, v in model.hparams.items() if not k.startswith("_")},
    )
    return model, result


if __name__ == "__main__":
    reverse_model, reverse_result = train_reverse(
        int(sys.argv[1]) if len(sys.argv) > 1 else 4,
        input_dim=train_loader.dataset.num_categories,
        model_dim=32,
        num_heads=1,
        num_classes=train_loader.dataset.num_categories,
        num_layers=1,
        dropout=0.0,
        lr=5e-3,
        warmup=16,
    )
    print("Val accuracy:  %4.2f%%" % (100.0 * reverse_result["val_acc"]))
    print("Test accuracy: %4.2f%%" % (100.0 * reverse_result["test_acc"]))
