"""Every public name of Lightning's user-facing modules is in trainkit at the same path, or
docs/compat.md says why not ("Public names not provided").

Which modules: ``lightning.pytorch`` itself; every public package under it (found with pkgutil;
a package or module whose dotted path has a part starting with ``_`` is private); the public
modules directly in ``lightning.pytorch.utilities``; and the modules programs import from
although they are not packages (``EXTRA_MODULES``: ``cli``, ``plugins.environments``,
``loggers.logger``, ``trainer.states``). Module path ``lightning.pytorch.X`` maps to
``trainkit.X``.

Which names of a module (its public names):
- where the module has ``__all__``: its entries, without ``_``-prefixed ones;
- otherwise the classes and functions of ``dir(module)`` without a leading ``_`` that are
  defined in the module (in one of its submodules for a package), or re-exported from the layers
  Lightning builds on (``lightning.fabric``, ``lightning_utilities``): Lightning's utilities
  modules are mostly such re-exports. A class or function imported from elsewhere in
  ``lightning.pytorch`` belongs to its home module and is counted there; third-party imports
  (torch, typing) and instances (loggers, caches) are not the module's API;
- plus the type aliases the module's own source assigns at its top level (``STEP_OUTPUT =
  Optional[...]``); TypeVars are not counted.

A name is present when ``getattr(importlib.import_module("trainkit.X"), name)`` works; the
count line in docs/compat.md ("P present / A documented-absent / T total") is checked too.
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
import inspect
import pkgutil
import re
import types
import typing
import warnings
from functools import cache
from pathlib import Path

import pytest

from tests.helpers.command_env import REPO

pytestmark = [
    pytest.mark.lightning,
    pytest.mark.skipif(
        importlib.util.find_spec("lightning") is None,
        reason="Lightning is not installed (pip install 'trainkit[test]')",
    ),
]

ROOT = "lightning.pytorch"
EXTRA_MODULES = ("cli", "plugins.environments", "loggers.logger", "trainer.states")
LOWER_LAYERS = ("lightning.fabric", "lightning_fabric", "lightning_utilities")
SECTION = "Public names not provided"
COUNT_LINE = re.compile(r"\*\*(\d+) present / (\d+) documented-absent / (\d+) total\*\*")


def lightning_modules() -> list[str]:
    """The dotted paths, relative to ``lightning.pytorch`` ("" for the root), of the modules
    whose names are compared."""
    package = importlib.import_module(ROOT)
    found = [""]
    for info in pkgutil.walk_packages(package.__path__, f"{ROOT}."):
        relative = info.name.removeprefix(f"{ROOT}.")
        if any(part.startswith("_") for part in relative.split(".")):
            continue
        in_utilities = relative.startswith("utilities.") and relative.count(".") == 1
        if info.ispkg or in_utilities or relative in EXTRA_MODULES:
            found.append(relative)
    return found


def is_type_alias(value: object) -> bool:
    if isinstance(value, typing.TypeVar):
        return False
    return isinstance(value, types.GenericAlias | types.UnionType) or (
        type(value).__module__ == "typing"
    )


def assigned_aliases(module: types.ModuleType) -> set[str]:
    """Public names the module's source assigns at its top level to a type alias."""
    source = Path(module.__file__ or "").read_text()
    names: set[str] = set()
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign):
            names.update(target.id for target in node.targets if isinstance(target, ast.Name))
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
    return {
        name
        for name in names
        if not name.startswith("_") and is_type_alias(getattr(module, name, None))
    }


def public_names(module: types.ModuleType) -> set[str]:
    """The module's public names, by the rule in this file's docstring."""
    declared = getattr(module, "__all__", None)
    if declared is not None:
        return {name for name in declared if not name.startswith("_")}
    own = module.__name__
    is_package = hasattr(module, "__path__")
    names = assigned_aliases(module)
    for name in dir(module):
        value = getattr(module, name)
        if name.startswith("_") or not (inspect.isclass(value) or inspect.isfunction(value)):
            continue
        home = getattr(value, "__module__", "") or ""
        defined_here = home == own or (is_package and home.startswith(f"{own}."))
        if defined_here or home.startswith(LOWER_LAYERS):
            names.add(name)
    return names


@cache
def lightning_names() -> frozenset[str]:
    """Every public name as its path under ``lightning.pytorch`` (``utilities.grad_norm``)."""
    found: set[str] = set()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for relative in lightning_modules():
            module = importlib.import_module(f"{ROOT}.{relative}" if relative else ROOT)
            prefix = f"{relative}." if relative else ""
            found.update(f"{prefix}{name}" for name in public_names(module))
    return frozenset(found)


def in_trainkit(path: str) -> bool:
    """Whether trainkit has the name at the same path (``utilities.grad_norm`` ->
    ``trainkit.utilities.grad_norm``), in the trainkit package being tested (an editable
    install of another checkout can answer imports of modules this one lacks)."""
    import trainkit

    relative, _, name = path.rpartition(".")
    try:
        module = importlib.import_module(f"trainkit.{relative}" if relative else "trainkit")
    except ModuleNotFoundError:
        return False
    home = Path(trainkit.__file__).parent
    return Path(module.__file__ or "").is_relative_to(home) and hasattr(module, name)


def page_section() -> str:
    page = (REPO / "docs" / "compat.md").read_text()
    return page.split(f"## {SECTION}\n", 1)[1].split("\n## ", 1)[0]


def documented_absent() -> dict[str, str]:
    """path -> reason, from the section's table (one row per reason, the names backticked)."""
    absent: dict[str, str] = {}
    for line in page_section().splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) != 2 or not cells[1].startswith("`"):
            continue
        reason, names = cells
        for path in re.findall(r"`([\w.]+)`", names):
            assert path not in absent, f"{path} is listed twice"
            absent[path] = reason
    return absent


def test_the_enumeration_finds_the_modules_programs_import_from():
    modules = set(lightning_modules())
    wanted = {"", "callbacks", "loggers", "utilities", "utilities.rank_zero", "utilities.types"}
    wanted |= {"strategies", "plugins", "plugins.io", "plugins.precision", "cli", "core"}
    wanted |= {"plugins.environments", "tuner", "profilers", "demos", "utilities.combined_loader"}
    assert wanted <= modules, sorted(wanted - modules)
    names = lightning_names()
    for path in ("Trainer", "utilities.rank_zero_only", "utilities.types.STEP_OUTPUT"):
        assert path in names, path
    assert "cli.LightningModule" not in names  # imported from lightning.pytorch: counted there


def test_every_lightning_name_is_in_trainkit_or_documented_as_not_provided():
    absent = documented_absent()
    missing = sorted(
        path for path in lightning_names() if path not in absent and not in_trainkit(path)
    )
    assert not missing, f"add these to trainkit or to docs/compat.md ({SECTION}): {missing}"


def test_names_documented_as_not_provided_are_lightning_names_trainkit_lacks():
    names = lightning_names()
    absent = documented_absent()
    unknown = sorted(path for path in absent if path not in names)
    assert not unknown, f"not public names of Lightning 2.6: {unknown}"
    provided = sorted(path for path in absent if in_trainkit(path))
    assert not provided, f"trainkit provides these now: remove them from the page: {provided}"


def test_the_count_line_is_current():
    names = lightning_names()
    absent = documented_absent()
    present = sum(1 for path in names if path not in absent)
    (line,) = COUNT_LINE.findall(page_section())
    assert tuple(int(number) for number in line) == (present, len(absent), len(names))
