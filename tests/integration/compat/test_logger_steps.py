"""The loggers' steps and ``metrics.csv`` as Lightning writes them (issue #47): a training step
is logged at the batches stepped before it, after the batch-end hooks, every
``log_every_n_steps`` stepped batches and when a stop is asked for; a validation and the epoch
end at the step of the batch that ran them; columns sorted by name."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from tests.integration.compat.frameworks import framework, lightning_installed, quiet_trainer

# name: (batches per epoch, epochs, Trainer arguments, stop after this batch of epoch 0)
CASES = {
    "every_50": (60, 2, {"log_every_n_steps": 50}, None),
    "accumulate": (6, 2, {"log_every_n_steps": 1, "accumulate_grad_batches": 2}, None),
    "val_twice_an_epoch": (8, 2, {"log_every_n_steps": 2, "val_check_interval": 0.5}, None),
    "stop_asked": (12, 2, {"log_every_n_steps": 5}, 2),
}


def fit_logging(pl_name: str, root: Path, case: str) -> dict:
    """Fit, then validate, logging in every step method and from a callback's batch end, to a
    CSVLogger and a TensorBoardLogger; the CSV rows and the TensorBoard steps by tag."""
    pl = framework(pl_name)
    batches, epochs, arguments, stop_at = CASES[case]

    class Logs(pl.LightningModule):
        def __init__(self) -> None:
            super().__init__()
            self.layer = nn.Linear(2, 1)

        def training_step(self, batch, batch_idx):
            loss = self.layer(batch[0]).pow(2).mean()
            self.log("train_loss", loss)
            self.log("both", loss, on_step=True, on_epoch=True)
            self.log("per_epoch", loss, on_step=False, on_epoch=True)
            return loss

        def validation_step(self, batch, batch_idx):
            loss = self.layer(batch[0]).pow(2).mean()
            self.log("val_loss", loss)
            self.log("val_each", loss, on_step=True, on_epoch=False)

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.01)

    class BatchEnd(pl.Callback):
        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
            pl_module.log("from_callback", float(batch_idx))
            if stop_at is not None and trainer.current_epoch == 0 and batch_idx == stop_at:
                trainer.should_stop = True

    torch.manual_seed(0)
    train = DataLoader(TensorDataset(torch.randn(4 * batches, 2)), batch_size=4)
    val = DataLoader(TensorDataset(torch.randn(8, 2)), batch_size=4)
    loggers = [
        pl.loggers.CSVLogger(root, name="csv"),
        pl.loggers.TensorBoardLogger(root, name="tb"),
    ]
    trainer = quiet_trainer(
        pl, root, logger=loggers, callbacks=[BatchEnd()], max_epochs=epochs, **arguments
    )
    model = Logs()
    trainer.fit(model, train, val)
    trainer.validate(model, val, verbose=False)
    for logger in loggers:
        logger.finalize("success")
    return {"csv": csv_rows(loggers[0].log_dir), "tensorboard": steps_by_tag(loggers[1].log_dir)}


def csv_rows(folder: str) -> list[list[str]]:
    with (Path(folder) / "metrics.csv").open(newline="") as file:
        rows = list(csv.reader(file))
    step = rows[0].index("step")
    return (
        [rows[0]]
        + [  # the steps and which columns hold a value (values: within 1e-6)
            [row[step], *(name for name, value in zip(rows[0], row) if value)] for row in rows[1:]
        ]
    )


def steps_by_tag(folder: str) -> dict[str, list[int]]:
    """Each tag's steps in the order they were written. A validate() after the fit writes a
    second events file; the reader goes through the files in name order, and a name's writer
    counter can sort 10 before 9, so the order comes from the events' wall times."""
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(folder)
    events.Reload()
    return {
        tag: [e.step for e in sorted(events.Scalars(tag), key=lambda e: e.wall_time)]
        for tag in events.Tags()["scalars"]
    }


def test_every_50_steps_at_lightnings_steps_and_columns(tmp_path):
    run = fit_logging("trainkit", tmp_path, "every_50")
    header, *rows = run["csv"]
    assert header == sorted(header)
    assert [row[0] for row in rows if "train_loss" in row] == ["49", "99"]
    assert run["tensorboard"]["train_loss"] == [49, 99]
    assert run["tensorboard"]["per_epoch"] == [59, 119]  # the epoch's last batch's step
    assert run["tensorboard"]["val_loss"] == [59, 119, 120]  # then validate() after the fit


@lightning_installed
@pytest.mark.lightning
@pytest.mark.parametrize("case", list(CASES))
def test_the_same_as_lightning(tmp_path, case):
    theirs = fit_logging("lightning.pytorch", tmp_path / "l", case)
    ours = fit_logging("trainkit", tmp_path / "t", case)
    ours["tensorboard"].pop("hp_metric", None)
    assert ours == theirs
