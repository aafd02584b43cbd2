"""The suite is shaped like the package: a test file under tests/unit/ mirrors a trainkit module
(``tests/unit/a/b/test_c.py`` tests ``trainkit/a/b/c.py`` or the package ``trainkit/a/b/c/``;
``test_c_more_words.py`` tests ``c`` too), and runs in this process; what starts interpreters,
ranks, clusters or servers lives in ``tests/integration/<area>/``, one of a few areas."""

from __future__ import annotations

import ast
import fnmatch
from pathlib import Path

from tests.helpers.command_env import REPO

TESTS = REPO / "tests"
PACKAGE = REPO / "trainkit"

# unit test files that test the package as a whole, or the suite, rather than one module
WHOLE_PACKAGE = {
    "test_architecture.py",  # the layers of trainkit's folders
    "test_compat_doc.py",  # docs/compat.md against the real signatures
    "test_test_helpers.py",  # tests/helpers/ and the conftest files use public APIs only
    "test_test_layout.py",  # this file
    "test_lightning_*.py",  # Lightning's names, paths and signatures, across the package
}
INTEGRATION_AREAS = {
    "cli",  # the console script as a user types it
    "clusters",  # SLURM, MPI, torchrun, Kubeflow, horovod, two nodes in namespaces
    "compat",  # the same programs under Lightning
    "first_hour",  # the README tour and a new user's project
    "gpu",  # the GPU machine's checks
    "imports",  # what importing costs, in a new interpreter
    "launch",  # trainkit's own launcher: ranks, their failures and output
    "loggers",  # a real tracking server
    "reliability",  # crashes, hangs, signals, resumes, disks that refuse
    "strategies",  # each strategy on real gloo ranks
}
# fixtures and helpers that start a new interpreter
STARTS_INTERPRETERS = {"run_cli", "start_cli", "no_leftovers", "straight_run"}
INTERPRETER_CALLS = {"run_captured", "run_trainkit", "run_program", "run_in_session"}


def unit_files() -> list[Path]:
    return sorted((TESTS / "unit").rglob("test_*.py"))


def mirrored(test_file: Path) -> bool:
    """Whether ``test_file`` names a trainkit module or package (or is a whole-package test)."""
    relative = test_file.relative_to(TESTS / "unit")
    folder = PACKAGE.joinpath(*relative.parts[:-1])
    if len(relative.parts) == 1 and any(
        fnmatch.fnmatch(relative.name, pattern) for pattern in WHOLE_PACKAGE
    ):
        return True
    stem = relative.stem.removeprefix("test_")
    names = {p.stem for p in folder.glob("*.py")} | {p.name for p in folder.iterdir() if p.is_dir()}
    names.discard("__init__")
    return any(stem == name or stem.startswith(name + "_") for name in names)


def test_every_unit_test_file_mirrors_a_trainkit_module():
    stray = [str(path.relative_to(TESTS)) for path in unit_files() if not mirrored(path)]
    assert not stray, f"tests/unit/ files that name no trainkit module: {stray}"


def test_the_whole_package_allowlist_names_files_that_exist():
    top = {path.name for path in (TESTS / "unit").glob("test_*.py")}
    for pattern in WHOLE_PACKAGE:
        assert fnmatch.filter(top, pattern), f"{pattern} matches no file of tests/unit/"


def test_the_check_tells_a_mirror_from_a_stray(tmp_path):
    assert mirrored(TESTS / "unit" / "distributed" / "launchers" / "test_job_nodes.py")
    assert mirrored(TESTS / "unit" / "cli" / "test_argv_help.py")  # argv.py, more words
    assert mirrored(TESTS / "unit" / "test_tuner.py")  # the package trainkit/tuner/
    assert not mirrored(TESTS / "unit" / "cli" / "test_first_hour.py")
    assert not mirrored(TESTS / "unit" / "test_hot_path.py")


def starts_an_interpreter(source: str) -> list[str]:
    """The tests of a module that take a fixture starting interpreters, and its calls of
    ``sys.executable`` or of a helper that runs one."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test"):
            taken = {arg.arg for arg in node.args.args} & STARTS_INTERPRETERS
            found += [f"{node.name} takes {name}" for name in sorted(taken)]
        elif isinstance(node, ast.Attribute) and ast.unparse(node) == "sys.executable":
            found.append(f"line {node.lineno}: sys.executable")
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in INTERPRETER_CALLS
        ):
            found.append(f"line {node.lineno}: {node.func.id}()")
    return found


def test_unit_tests_start_no_interpreter():
    """The CLI runs in-process there (the ``run_main`` fixture, or ``trainkit.cli.main``)."""
    offenders = {
        str(path.relative_to(TESTS)): found
        for path in unit_files()
        if (found := starts_an_interpreter(path.read_text()))
    }
    assert not offenders, offenders


def test_integration_tests_sit_in_one_of_a_few_areas():
    areas = {
        path.relative_to(TESTS / "integration").parts[0]
        for path in (TESTS / "integration").rglob("test_*.py")
    }
    assert areas <= INTEGRATION_AREAS, sorted(areas - INTEGRATION_AREAS)
    top = [path.name for path in TESTS.glob("test_*.py")]
    assert not top, f"test files outside tests/unit/ and tests/integration/: {top}"
