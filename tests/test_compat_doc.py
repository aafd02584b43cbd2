"""docs/compat.md stays true: the constructor arguments it lists are the real signatures."""

from __future__ import annotations

import inspect
import re

from tests.conftest import REPO
from trainkit import (
    CSVLogger,
    DataModule,
    LightningDataModule,
    LightningModule,
    TensorBoardLogger,
    TrainModule,
)

PAGE = (REPO / "docs" / "compat.md").read_text()


def documented_arguments(name: str) -> list[str]:
    (row,) = [line for line in PAGE.splitlines() if line.startswith(f"| `{name}` |")]
    (listed,) = re.findall(r"arguments: ([\w, ]+)", row)
    return [arg.strip() for arg in listed.split(",")]


def test_logger_arguments_on_the_page_are_the_signatures():
    for cls in (TensorBoardLogger, CSVLogger):
        signature = [p for p in inspect.signature(cls.__init__).parameters if p != "self"]
        assert documented_arguments(cls.__name__) == signature


def test_the_lightning_names_on_the_page_exist():
    assert LightningModule is TrainModule and LightningDataModule is DataModule
    assert "`trainkit.LightningModule`" in PAGE and "`trainkit.LightningDataModule`" in PAGE
