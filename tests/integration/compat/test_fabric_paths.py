"""Lightning Fabric's utility paths that Trainer programs import
(``lightning.fabric.utilities.X`` / ``lightning_fabric.utilities.X``) are
``trainkit.fabric.utilities.X`` (docs/porting.md, issue #47): the names, their parameters and
what they do, in-process beside Lightning's, and a ported program under both."""

from __future__ import annotations

import collections
import dataclasses
import importlib
import inspect
import random

import numpy as np
import pytest
import torch

from tests.integration.compat.frameworks import lightning_installed
from tests.integration.compat.ported import run_program, same_values

# module (under utilities; "" the package) -> the names trainkit provides there
FABRIC_PATHS = {
    "": [
        "AttributeDict",
        "LightningEnum",
        "disable_possible_user_warnings",
        "is_shared_filesystem",
        "measure_flops",
        "move_data_to_device",
        "rank_zero_deprecation",
        "rank_zero_info",
        "rank_zero_only",
        "rank_zero_warn",
        "suggested_max_num_workers",
    ],
    "apply_func": [
        "apply_to_collection",
        "convert_tensors_to_scalars",
        "convert_to_tensors",
        "move_data_to_device",
    ],
    "cloud_io": ["_atomic_save", "_load", "get_filesystem"],
    "data": [
        "AttributeDict",
        "has_iterable_dataset",
        "has_len",
        "sized_len",
        "suggested_max_num_workers",
    ],
    "distributed": ["ReduceOp", "is_shared_filesystem"],
    "enums": ["LightningEnum"],
    "exceptions": ["MisconfigurationException"],
    "imports": ["RequirementCache", "compare_version"],
    "rank_zero": [
        "LightningDeprecationWarning",
        "WarningCache",
        "rank_prefixed_message",
        "rank_zero_debug",
        "rank_zero_deprecation",
        "rank_zero_info",
        "rank_zero_only",
        "rank_zero_warn",
    ],
    "seed": ["pl_worker_init_function", "reset_seed", "seed_everything"],
    "types": ["_DEVICE", "_MAP_LOCATION_TYPE", "_PATH", "Optimizable", "ReduceOp", "Steppable"],
    "warnings": [
        "LightningDeprecationWarning",
        "PossibleUserWarning",
        "disable_possible_user_warnings",
    ],
}
# the package's names trainkit does not provide (docs/porting.md says why)
ABSENT = {"Throughput", "ThroughputMonitor"}


def module(root: str, name: str):
    return importlib.import_module(f"{root}.utilities" + (f".{name}" if name else ""))


def ours(name: str):
    return module("trainkit.fabric", name)


@pytest.mark.parametrize("name", list(FABRIC_PATHS), ids=lambda n: n or "utilities")
def test_every_path_holds_its_names(name):
    found = ours(name)
    assert sorted(found.__all__) == sorted(FABRIC_PATHS[name])
    for attribute in FABRIC_PATHS[name]:
        assert getattr(found, attribute) is not None


def test_the_fabric_package_is_not_imported_by_trainkit():
    import subprocess
    import sys

    code = "import sys, trainkit; trainkit.Trainer; print('trainkit.fabric' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout == (
        "False\n"
    )


def described(function) -> list[tuple[str, str]]:
    parameters = inspect.signature(function).parameters.values()
    return [(p.name, repr(p.default) if p.default is not p.empty else "") for p in parameters]


@lightning_installed
@pytest.mark.lightning
@pytest.mark.parametrize("root", ["lightning.fabric", "lightning_fabric"])
@pytest.mark.parametrize("name", list(FABRIC_PATHS), ids=lambda n: n or "utilities")
def test_lightnings_path_has_the_same_names_and_parameters(root, name):
    theirs = module(root, name)
    for attribute in FABRIC_PATHS[name]:
        mine, other = getattr(ours(name), attribute), getattr(theirs, attribute)
        if inspect.isfunction(other) and not attribute.startswith("rank_zero"):
            assert described(mine) == described(other), attribute
    if not name:
        assert set(theirs.__all__) - set(FABRIC_PATHS[""]) == ABSENT


@dataclasses.dataclass
class Batch:
    x: torch.Tensor
    n: int


Point = collections.namedtuple("Point", "a b")


@lightning_installed
@pytest.mark.lightning
def test_the_collection_helpers_return_what_lightnings_return():
    theirs = importlib.import_module("lightning.fabric.utilities.apply_func")
    mine = ours("apply_func")
    batch = {
        "list": [torch.ones(2), (1, 2.5, True)],
        "ordered": collections.OrderedDict(k=torch.zeros(2)),
        "dataclass": Batch(torch.ones(1), 3),
        "namedtuple": Point(torch.ones(1), "text"),
    }
    moved, expected = (
        mine.move_data_to_device(batch, "meta"),
        theirs.move_data_to_device(batch, "meta"),
    )
    assert type(moved["ordered"]) is collections.OrderedDict and type(moved["namedtuple"]) is Point
    assert moved["dataclass"].x.device.type == "meta" == expected["dataclass"].x.device.type
    numbers = {"a": 1, "b": True, "c": 2.5, "d": np.ones(2)}
    for key, value in mine.convert_to_tensors(numbers, "cpu").items():
        other = theirs.convert_to_tensors(numbers, "cpu")[key]
        assert value.dtype == other.dtype and torch.equal(value, other)
    scalars = {"x": torch.tensor(2.5), "y": [torch.tensor(1)]}
    assert mine.convert_tensors_to_scalars(scalars) == theirs.convert_tensors_to_scalars(scalars)
    with pytest.raises(ValueError, match="one element"):
        mine.convert_tensors_to_scalars(torch.ones(2))


@lightning_installed
@pytest.mark.lightning
def test_seeding_draws_what_lightnings_draws(monkeypatch):
    theirs = importlib.import_module("lightning.fabric.utilities.seed")
    mine = ours("seed")

    def draws() -> tuple:
        return (torch.rand(1).item(), random.random(), float(np.random.rand()))

    assert mine.seed_everything(11, verbose=False) == 11
    first = draws()
    theirs.seed_everything(11, verbose=False)
    assert draws() == first
    mine.reset_seed()
    assert draws() == first
    for seed_workers in (mine.pl_worker_init_function, theirs.pl_worker_init_function):
        torch.manual_seed(5)
        seed_workers(2, rank=1)
        first = first + draws()
    assert first[3:6] == first[6:9]
    with pytest.raises(ValueError, match="seed_everything"):
        mine.seed_everything(-1)
    monkeypatch.delenv("TRAINKIT_GLOBAL_SEED", raising=False)
    monkeypatch.delenv("PL_GLOBAL_SEED", raising=False)
    with pytest.warns(UserWarning, match="No seed found, seed set to 0"):
        assert mine.seed_everything() == 0


@lightning_installed
@pytest.mark.lightning
def test_a_checkpoint_saved_by_either_loads_with_the_other(tmp_path):
    theirs = importlib.import_module("lightning.fabric.utilities.cloud_io")
    mine = ours("cloud_io")
    state = {"weight": torch.arange(3.0), "step": 4}
    for save, load in ((mine._atomic_save, theirs._load), (theirs._atomic_save, mine._load)):
        for path in (tmp_path / f"{save.__module__}.ckpt", f"memory://{save.__module__}/s.ckpt"):
            save(state, path)
            loaded = load(path, map_location="cpu", weights_only=True)
            assert loaded["step"] == 4 and torch.equal(loaded["weight"], state["weight"])
    assert type(mine.get_filesystem(tmp_path)) is type(theirs.get_filesystem(tmp_path))


def test_the_ported_program_trains_under_trainkit(tmp_path):
    result = run_program("fabric_utilities", tmp_path)
    assert result["seed"] == 7 and result["loaded"] == {"epochs": 3}
    assert result["metrics"]["train_loss_epoch"] < 1.0


@lightning_installed
@pytest.mark.lightning
@pytest.mark.timeout(300)
def test_the_ported_program_ends_the_same_under_lightning(tmp_path):
    theirs = run_program("fabric_utilities", tmp_path / "lightning", lightning=True)
    same_values(run_program("fabric_utilities", tmp_path / "trainkit"), theirs)


# what public Trainer programs import from Lightning Fabric (found by searching public code for
# "from lightning_fabric" and "from lightning.fabric"), each under trainkit.fabric.utilities
REAL_PROGRAM_IMPORTS = [
    ("apply_func", "move_data_to_device"),
    ("apply_func", "convert_tensors_to_scalars"),
    ("cloud_io", "get_filesystem"),
    ("seed", "seed_everything"),
    ("rank_zero", "rank_zero_only"),
    ("rank_zero", "rank_zero_info"),
    ("data", "AttributeDict"),
    ("types", "_PATH"),
    ("types", "_DEVICE"),
    ("warnings", "PossibleUserWarning"),
    ("", "move_data_to_device"),
]


@pytest.mark.parametrize(("name", "attribute"), REAL_PROGRAM_IMPORTS, ids=lambda v: v or "pkg")
def test_what_real_programs_import_is_at_the_trainkit_path(name, attribute):
    assert attribute in FABRIC_PATHS[name]
    found = getattr(ours(name), attribute)
    if lightning_present():
        for root in ("lightning.fabric", "lightning_fabric"):
            theirs = getattr(module(root, name), attribute)
            assert theirs is not None and (callable(found) or not inspect.isfunction(theirs))


def lightning_present() -> bool:
    import importlib.util

    return importlib.util.find_spec("lightning_fabric") is not None
