"""docs/compat.md stays true: the constructor arguments it lists are the real signatures."""

from __future__ import annotations

import inspect
import re

from tests.helpers.command_env import REPO
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


def table_rows(heading: str) -> list[list[str]]:
    """The rows of the first table under ``## heading``, as raw cells."""
    section = PAGE.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| `")]
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in rows]


def names_in(cell: str) -> list[str]:
    """The member names a cell lists: each `backticked` name, without ``self.`` and ``()``."""
    found = [
        name.removeprefix("self.").removesuffix("()") for name in re.findall(r"`([^`]+)`", cell)
    ]
    return [name for name in found if name.isidentifier()]


def test_every_trainer_argument_marked_supported_is_a_trainkit_argument():
    from trainkit import Trainer

    ours = set(inspect.signature(Trainer.__init__).parameters)
    for cell, status, _note in table_rows("Trainer arguments"):
        (name,) = names_in(cell)
        assert status in ("supported", "different", "not supported"), name
        assert (name in ours) == (status != "not supported"), name


def test_module_members_marked_supported_exist():
    module = TrainModule()
    for cell, status, _note in table_rows("LightningModule members and hooks"):
        for name in names_in(cell):
            exists = hasattr(type(module), name) or name in vars(module)
            if status != "different":  # different: how it is provided is in the note
                assert exists == (status == "supported"), name


lightning = __import__("importlib").util.find_spec("lightning")


@__import__("pytest").mark.skipif(lightning is None, reason="Lightning is not installed")
def test_every_lightning_trainer_argument_and_module_member_is_on_the_page():
    """Against the real Lightning: nothing a user can pass or call is left unaccounted for."""
    import lightning.pytorch as pl
    import torch

    documented = {names_in(row[0])[0] for row in table_rows("Trainer arguments")}
    theirs = set(inspect.signature(pl.Trainer.__init__).parameters) - {"self"}
    assert theirs <= documented, sorted(theirs - documented)
    members = PAGE.split("## LightningModule members and hooks\n", 1)[1].split("\n## ", 1)[0]
    ours = TrainModule()
    for name in dir(pl.LightningModule):
        if name.startswith("_") or name.isupper() or hasattr(torch.nn.Module, name):
            continue
        covered = name in members or hasattr(type(ours), name) or name in vars(ours)
        assert covered, name
