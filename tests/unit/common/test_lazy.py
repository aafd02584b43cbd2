"""The packages that load their names on first use (``trainkit``, ``trainkit.callbacks``,
``trainkit.cli``, ``trainkit.utilities``, ``trainkit.core``, ``trainkit.demos``) also
declare them for type checkers: a literal ``__all__`` and ``TYPE_CHECKING`` imports that name the
same modules as the lazy table, so ``from trainkit import Trainer`` is typed in an editor."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[3] / "trainkit"


def declared_imports(path: Path) -> dict[str, str]:
    """name -> module of the ``if TYPE_CHECKING:`` imports of ``path``."""
    found: dict[str, str] = {}
    for node in ast.parse(path.read_text()).body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for stmt in node.body:
                assert isinstance(stmt, ast.ImportFrom) and stmt.module
                found.update({alias.name: stmt.module for alias in stmt.names})
    return found


@pytest.mark.parametrize(
    ("package", "path", "eager"),
    [
        ("trainkit", PACKAGE / "__init__.py", {"__version__"}),
        ("trainkit.callbacks", PACKAGE / "callbacks" / "__init__.py", {"Callback", "Checkpoint"}),
        ("trainkit.cli", PACKAGE / "cli" / "__init__.py", set()),
        ("trainkit.tuner", PACKAGE / "tuner" / "__init__.py", set()),
        ("trainkit.utilities", PACKAGE / "utilities" / "__init__.py", set()),
        ("trainkit.core", PACKAGE / "core" / "__init__.py", set()),
        ("trainkit.demos", PACKAGE / "demos" / "__init__.py", set()),
    ],
)
def test_lazy_names_are_declared_for_type_checkers(package, path, eager):
    module = importlib.import_module(package)
    assert declared_imports(path) == module._LAZY
    assert sorted(module.__all__) == sorted({*module._LAZY, *eager})
    for name in module.__all__:
        assert getattr(module, name) is not None
