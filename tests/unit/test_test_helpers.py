"""The test harness uses public APIs of Python, pytest and torch only: no helper or conftest.py
reaches for a private name of another library (an import of ``_pytest`` or ``torch._dynamo``,
``runpy._run_module_as_main``, ``item._nodeid``, an override of ``Popen._execute_child``), so
the next Python, pytest or torch release cannot break the suite from inside, and a failure in
the harness is never mistaken for a trainkit bug. A module's own private names are its own."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

from tests.helpers.command_env import REPO

# documented public API despite the underscore
PUBLIC_UNDERSCORED = {
    "_exit",  # os._exit
    "_asdict",  # namedtuple
    "_replace",
    "_fields",
    "_make",
}
OUR_PACKAGES = ("tests", "trainkit")


def harness_files() -> list[Path]:
    """tests/helpers/ and every conftest.py of the suite."""
    tests = REPO / "tests"
    found = set((tests / "helpers").rglob("*.py")) | set(tests.rglob("conftest.py"))
    return sorted(path for path in found if "__pycache__" not in path.parts)


def is_private(name: str) -> bool:
    return name.startswith("_") and not name.startswith("__")


def own_names(tree: ast.Module) -> set[str]:
    """The private names a module defines itself: functions, classes, assigned names, its
    objects' attributes (``self._x = ...``), parameters and keyword arguments."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
            if isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"):
                names.add(node.attr)
        elif isinstance(node, ast.arg) or (isinstance(node, ast.keyword) and node.arg):
            names.add(node.arg)
        elif isinstance(node, ast.alias):
            names.add(node.asname or node.name.split(".")[0])
    return {name for name in names if is_private(name)}


def private_uses(source: str) -> list[str]:
    """Each use of another library's private name in ``source``, as ``line: what``."""
    tree = ast.parse(source)
    own = own_names(tree)
    found: list[str] = []

    def foreign(module: str) -> bool:
        return module.split(".")[0] not in OUR_PACKAGES

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if foreign(alias.name) and any(map(is_private, alias.name.split("."))):
                    found.append(f"{node.lineno}: import {alias.name}")
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if not foreign(node.module):
                continue
            if any(map(is_private, node.module.split("."))):
                found.append(f"{node.lineno}: from {node.module} import ...")
            for alias in node.names:
                if is_private(alias.name):
                    found.append(f"{node.lineno}: from {node.module} import {alias.name}")
        elif isinstance(node, ast.Attribute) and is_private(node.attr):
            of_base = isinstance(node.value, ast.Call) and ast.unparse(node.value) == "super()"
            if of_base or (node.attr not in own and node.attr not in PUBLIC_UNDERSCORED):
                found.append(f"{node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            by_name = node.func.id in ("getattr", "setattr", "hasattr", "delattr")
            if by_name and len(node.args) > 1 and isinstance(node.args[1], ast.Constant):
                name = node.args[1].value
                if isinstance(name, str) and is_private(name) and name not in own:
                    found.append(f"{node.lineno}: {ast.unparse(node)}")
        if isinstance(node, ast.ClassDef) and node.bases:
            # overriding a private method of another library's class
            base_is_foreign = any(
                isinstance(base, ast.Attribute) or ast.unparse(base) not in own_classes(tree)
                for base in node.bases
            )
            for item in node.body:
                defined = isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))
                if base_is_foreign and defined and is_private(item.name):
                    found.append(f"{item.lineno}: {node.name}.{item.name} overrides a base's")
    return found


def own_classes(tree: ast.Module) -> set[str]:
    return {node.name for node in ast.walk(tree) if isinstance(node, ast.ClassDef)}


def test_the_check_finds_what_a_fork_server_built_on_internals_used():
    """The detector itself: each way the old harness reached into CPython and pytest."""
    source = textwrap.dedent("""
        import atexit
        import runpy
        import subprocess
        import _pytest.nodes
        from torch._dynamo import config
        from subprocess import _args_from_interpreter_flags

        class WarmPopen(subprocess.Popen):
            def _execute_child(self, *args):
                super()._execute_child(*args)

            def poll_it(self):
                with self._waitpid_lock:
                    self._handle_exitstatus(0)

        def run(item):
            runpy._run_module_as_main("trainkit")
            atexit._run_exitfuncs()
            item._nodeid = item.nodeid + "@group"
            return getattr(item, "_request")
    """)
    found = "\n".join(private_uses(source))
    for expected in (
        "import _pytest.nodes",
        "from torch._dynamo import",
        "from subprocess import _args_from_interpreter_flags",
        "WarmPopen._execute_child overrides",
        "super()._execute_child",
        "self._waitpid_lock",
        "self._handle_exitstatus",
        "runpy._run_module_as_main",
        "atexit._run_exitfuncs",
        "getattr(item, '_request')",
    ):
        assert expected in found, (expected, found)


def test_a_modules_own_private_names_are_its_own():
    source = textwrap.dedent("""
        import os
        from typing import NamedTuple

        class Point(NamedTuple):
            x: int

        class Server:
            def __init__(self):
                self._channel = None

            def _read(self):
                return self._channel

        def _helper(point):
            os._exit(0) if point is None else point._replace(x=1)
            return _helper
    """)
    assert private_uses(source) == []


def test_the_harness_uses_no_private_name_of_python_pytest_or_torch():
    files = harness_files()
    assert REPO / "tests" / "conftest.py" in files and len(files) > 5
    found = {
        str(path.relative_to(REPO)): uses
        for path in files
        if (uses := private_uses(path.read_text()))
    }
    assert not found, found


def test_nested_process_watches_each_see_their_own_block():
    """The unit tier's watch inside the census's: each ends its own, whatever they saw."""
    from tests.helpers.spawn_census import WATCHERS, audit, watching

    with watching() as outer:
        audit("os.fork", ())  # what the outer saw before the inner began (a fork: allowed here)
        with watching() as inner:
            pass
        assert inner == [] and outer == ["os.fork ()"] and WATCHERS[-1] is outer
    assert all(watcher is not outer and watcher is not inner for watcher in WATCHERS)
