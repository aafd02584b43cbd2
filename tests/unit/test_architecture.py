"""The shape of the package: trainkit's folders sit in layers and no run-time import goes from a
lower layer to a higher one, its modules never import each other in a circle at run time
(imports under TYPE_CHECKING are free: a hook may annotate ``trainer: "Trainer"``), no file grows
past 400 lines, and a parameter is typed ``Any`` only where the object is the user's."""

from __future__ import annotations

import ast
import re
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "trainkit"
MAX_LINES = 400
# the layers, bottom first: a module may import at run time what sits in its own layer or below.
# A module belongs to the longest entry that names it or a package above it
# (``trainkit.checkpoint.state`` is not in ``trainkit.checkpoint``'s layer).
LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    # imports nothing of trainkit: what every layer may name
    ("ground floor: errors, types, enums, warnings", ("trainkit.errors", "trainkit.common")),
    # small parts over torch and the standard library, each a leaf above the ground floor
    (
        "tools",
        (
            "trainkit.accelerators",
            "trainkit.batch_size",
            "trainkit.checkpoint",
            "trainkit.combined_loader",
            "trainkit.compiling",
            "trainkit.cycle_collector",
            "trainkit.devices",
            "trainkit.gradients",
            "trainkit.hparams",
            "trainkit.logo",
            "trainkit.metrics",
            "trainkit.optim",
            "trainkit.profilers",
            "trainkit.scaling",
            "trainkit.seed",
        ),
    ),
    ("run state", ("trainkit.state",)),
    (
        "processes, strategies, data",
        ("trainkit.data", "trainkit.distributed", "trainkit.plugins", "trainkit.strategies"),
    ),
    ("the user's classes", ("trainkit.datamodule", "trainkit.module", "trainkit.module_hooks")),
    (
        "callbacks, loggers, what a checkpoint holds",
        ("trainkit.callbacks", "trainkit.checkpoint.state", "trainkit.loggers"),
    ),
    ("loops", ("trainkit.loops",)),
    ("tuner", ("trainkit.tuner",)),
    ("trainer", ("trainkit.trainer",)),
    # the command line, and Lightning's import paths, which re-export from every layer below
    (
        "cli, Lightning's paths, the package",
        (
            "trainkit",
            "trainkit.__main__",
            "trainkit.cli",
            "trainkit.core",
            "trainkit.demos",
            "trainkit.fabric",
            "trainkit.utilities",
        ),
    ),
)
# files whose length is the surface they mirror, not mixed concepts: ModelCheckpoint's arguments
# and public methods are one class by contract
LONGER_BY_CONTRACT = {"trainkit/callbacks/checkpoint.py": 440}
# the parameters that hold the user's own objects, which trainkit does not define: a batch as the
# loader yields it, a step's or predict's outputs, the user's loaders, datasets and nested data,
# a scheduler of any class (it only needs .step), an all_gather group of the user's backend
USERS_OBJECTS = {
    "batch",
    "outputs",
    "output",
    "prediction",
    "loader",
    "datasets",
    "iterables",
    "in_dict",
    "scheduler",
    "group",
}


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def all_modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(PACKAGE.rglob("*.py"))}


def is_type_checking_block(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and ast.unparse(node.test) in (
        "TYPE_CHECKING",
        "typing.TYPE_CHECKING",
    )


def import_nodes(tree: ast.Module, type_only: bool) -> list[ast.Import | ast.ImportFrom]:
    """The imports of a module: those under ``if TYPE_CHECKING:`` (``type_only``), or all the
    others (module-level and inside functions)."""
    found: list[ast.Import | ast.ImportFrom] = []

    def walk(node: ast.AST, under_type_checking: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                if under_type_checking == type_only:
                    found.append(child)
            else:
                walk(child, under_type_checking or is_type_checking_block(child))

    walk(tree, False)
    return found


def imported_names(
    path: Path, name: str, modules: dict[str, Path], type_only: bool = False
) -> set[str]:
    """The trainkit modules ``path`` imports at run time anywhere in its body (at module level
    and inside functions), or, with ``type_only``, under TYPE_CHECKING. ``from pkg import mod``
    counts as importing ``pkg.mod`` when that is a module. The parent packages of the importer
    itself are not counted (Python initialises them first whatever the code says)."""
    is_package = path.name == "__init__.py"
    package = name if is_package else name.rpartition(".")[0]
    found: set[str] = set()
    for node in import_nodes(ast.parse(path.read_text(), str(path)), type_only):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        else:
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base]) if base else ".".join(anchor)
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                found.add(submodule if submodule in modules else base)
    ancestors = {name.rsplit(".", i)[0] for i in range(1, name.count(".") + 1)}
    return {m for m in found if m in modules and m != name and m not in ancestors}


def import_graph(type_only: bool = False) -> dict[str, set[str]]:
    """Who imports whom at run time (with ``type_only``, under TYPE_CHECKING too)."""
    modules = all_modules()
    graph = {}
    for name, path in modules.items():
        edges = imported_names(path, name, modules)
        if type_only:
            edges |= imported_names(path, name, modules, type_only=True)
        graph[name] = edges
    return graph


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph[node]):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_circle_finder_finds_a_circle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(graph) == [["a", "b", "c"]]


def test_the_graph_sees_function_level_and_type_checking_imports():
    graph = import_graph(type_only=True)
    # the stage runner imports the spawn launcher at module level, cli.command imports the
    # signals leaf inside a function, the fit loop reads the run state, and the metric hub
    # names the run state for the type checker only
    assert "trainkit.distributed.launchers.spawn" in graph["trainkit.trainer.running"]
    assert "trainkit.distributed.signals" in graph["trainkit.cli.command"]
    assert "trainkit.state" in graph["trainkit.loops.fit"]
    assert "trainkit.state" in graph["trainkit.loops.metric_hub"]


def layer_of(name: str) -> int:
    """The index in ``LAYERS`` of the longest entry naming ``name`` or a package above it."""
    best, depth = -1, -1
    for index, (_, members) in enumerate(LAYERS):
        for member in members:
            if (name == member or name.startswith(member + ".")) and member.count(".") > depth:
                best, depth = index, member.count(".")
    return best


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    """Every run-time import from a module to one in a higher layer, as ``importer -> imported
    (lower layer -> higher layer)``."""
    found = []
    for name in sorted(graph):
        for target in sorted(graph[name]):
            if layer_of(target) > layer_of(name):
                below, above = LAYERS[layer_of(name)][0], LAYERS[layer_of(target)][0]
                found.append(f"{name} -> {target} ({below} -> {above})")
    return found


def test_every_module_sits_in_a_layer():
    assert [name for name in all_modules() if layer_of(name) < 0] == []


def test_the_layer_check_finds_an_upward_import():
    graph = {
        "trainkit.loops.fit": {"trainkit.trainer.trainer"},
        "trainkit.trainer": {"trainkit.loops"},
    }
    assert upward_imports(graph) == [
        "trainkit.loops.fit -> trainkit.trainer.trainer (loops -> trainer)"
    ]
    assert layer_of("trainkit.checkpoint.state") > layer_of("trainkit.checkpoint.files")


def test_no_run_time_import_goes_up_a_layer():
    """The ground floor imports nothing of trainkit, nothing below ``trainer/`` imports the
    Trainer, nothing inside trainkit imports Lightning's paths (``utilities/``, ``core/``...):
    each at run time; a type-only import may name any class."""
    assert upward_imports(import_graph()) == []


def test_the_ground_floor_imports_nothing_of_trainkit():
    graph = import_graph()
    ground = [name for name in graph if layer_of(name) == 0]
    assert ground and {name: graph[name] for name in ground if graph[name] - set(ground)} == {}


def test_no_trainkit_modules_import_each_other_in_a_circle_at_run_time():
    assert circles(import_graph()) == []


def test_the_run_state_and_the_signals_contract_are_leaves():
    """At run time the run state's package imports only itself and the ground floor (its enums),
    so every part may import it (its fields name their classes for the type checker only)."""
    graph = import_graph()
    state = {name for name in graph if name.startswith("trainkit.state")}
    ground = {name for name in graph if layer_of(name) == 0}
    for name in state:
        assert graph[name] <= state | ground, name
    assert graph["trainkit.distributed.signals"] == set()


def test_no_file_in_trainkit_is_over_400_lines():
    long = {
        str(path.relative_to(PACKAGE.parent)): lines
        for path in PACKAGE.rglob("*.py")
        if (lines := len(path.read_text().splitlines()))
        > LONGER_BY_CONTRACT.get(str(path.relative_to(PACKAGE.parent)), MAX_LINES)
    }
    assert long == {}


def test_parameters_are_typed_any_only_where_the_object_is_the_users():
    """Ours are named by their class or a Protocol: a hook's ``pl_module`` is a ``TrainModule`` (``*args``/``**kwargs`` forwarded to the user or to torch
    are not counted)."""
    typed_any = []
    for path in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                arguments = node.args
                for argument in [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs]:
                    annotation = argument.annotation
                    if (
                        annotation is not None
                        and ast.unparse(annotation).strip("'\"") == "Any"
                        and argument.arg not in USERS_OBJECTS
                    ):
                        where = path.relative_to(PACKAGE.parent)
                        typed_any.append(f"{where}:{node.lineno} {node.name}({argument.arg})")
    assert typed_any == []


def test_every_file_docs_architecture_md_names_exists():
    """docs/architecture.md names each part by its path (``trainkit/loops/fit.py``): every
    ``trainkit/...py`` it names is a file, so the map cannot drift from the code unnoticed."""
    text = (PACKAGE.parent / "docs" / "architecture.md").read_text()
    named = set(re.findall(r"trainkit/[\w/]+\.py", text))
    missing = sorted(path for path in named if not (PACKAGE.parent / path).is_file())
    assert len(named) > 100 and missing == []
