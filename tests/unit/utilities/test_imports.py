"""The torch versions and builds trainkit runs on: the pinned 2.13 (CPU build) here and in CI,
and the GPU machine's 2.11 (CUDA 13 build; scripts/gpu_check.sh runs this file there too).

trainkit uses no torch name newer than 2.11. ``NEWER_THAN_2_11`` lists the public names torch
2.12-2.13 added in the modules trainkit imports from, found by comparing ``dir()`` of those
modules under both versions (a torch 2.11 wheel installed in a second virtual environment here:
``pip install torch==2.11.0``). A use of one must be guarded (looked up with ``getattr(module,
"name", None)``/``hasattr`` and a fallback for its absence, checked by a test that deletes the
name with monkeypatch); a plain ``torch.x.name`` or ``from torch.x import name`` fails here.
When the pin moves past 2.13, add that version's new names the same way.
"""

from __future__ import annotations

import ast
import importlib
import os
import textwrap

import pytest
import torch

from tests.helpers.command_env import REPO
from tests.helpers.models import Regression, regression_loader
from tests.helpers.torch_versions import NEWER_TENSOR_METHODS, NEWER_THAN_2_11, OLDEST_TORCH

# "module.name" -> the test that deletes the name and checks trainkit's fallback (none so far)
GUARDED: dict[str, str] = {}


def newer_names() -> set[str]:
    return {f"{module}.{name}" for module, names in NEWER_THAN_2_11.items() for name in names}


def torch_names(source: str) -> set[str]:
    """The dotted torch names a source uses: ``from torch.x import y`` (as ``torch.x.y``),
    ``import torch.x as t`` and every attribute chain on such a name (``t.y.z``)."""
    tree = ast.parse(source)
    aliases: dict[str, str] = {}
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "torch":
                    local = alias.asname or alias.name.split(".")[0]
                    aliases[local] = alias.name if alias.asname else local
                    found.add(alias.name)
        elif isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "torch":
            for alias in node.names:
                aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
                found.add(f"{node.module}.{alias.name}")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute):
            chain: list[str] = []
            current: ast.expr = node
            while isinstance(current, ast.Attribute):
                chain.append(current.attr)
                current = current.value
            if isinstance(current, ast.Name) and current.id in aliases:
                found.add(".".join([aliases[current.id], *reversed(chain)]))
    return found


def unguarded_newer_uses(source: str) -> set[str]:
    """The names of ``NEWER_THAN_2_11`` a source uses directly (prefixes of longer chains
    count: ``torch.accelerator.empty_host_cache()`` uses ``torch.accelerator.empty_host_cache``),
    and newer tensor methods called as methods."""
    newer = newer_names()
    used = set()
    for name in torch_names(source):
        parts = name.split(".")
        used |= {".".join(parts[:i]) for i in range(2, len(parts) + 1)} & newer
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Attribute) and node.attr in NEWER_TENSOR_METHODS:
            used.add(f"torch.Tensor.{node.attr}")
    return used - set(GUARDED)


def trainkit_sources() -> dict[str, str]:
    return {
        str(path.relative_to(REPO)): path.read_text()
        for path in sorted((REPO / "trainkit").rglob("*.py"))
    }


def test_trainkit_uses_no_torch_name_newer_than_2_11_unguarded():
    uses = {
        f"{path}: {name}"
        for path, source in trainkit_sources().items()
        for name in unguarded_newer_uses(source)
    }
    assert not uses, (
        f"trainkit uses torch names that torch {'.'.join(map(str, OLDEST_TORCH))} (the GPU "
        f"machine's) lacks: {sorted(uses)}; look them up with getattr and a fallback, and list "
        "each in GUARDED with the test that deletes it (tests/unit/utilities/test_imports.py)"
    )


def test_the_scan_sees_trainkits_torch_names_and_catches_a_newer_one():
    everything = set().union(*(torch_names(s) for s in trainkit_sources().values()))
    assert {"torch.amp.GradScaler", "torch.distributed.fsdp.fully_shard"} <= everything
    assert "torch.cuda.max_memory_allocated" in everything
    source = textwrap.dedent("""
        import torch
        import torch.distributed as dist
        from torch.nn import LinearCrossEntropyLoss
        from torch.backends import cuda as backend

        torch.accelerator.empty_host_cache()
        dist.all_gather_single(out, x)
        backend.cublas_workspace_size
        pointer = tensor.const_data_ptr()
        guarded = getattr(torch.accelerator, "empty_host_cache", None)
    """)
    assert unguarded_newer_uses(source) == {
        "torch.accelerator.empty_host_cache",
        "torch.distributed.all_gather_single",
        "torch.nn.LinearCrossEntropyLoss",
        "torch.backends.cuda.cublas_workspace_size",
        "torch.Tensor.const_data_ptr",
    }


@pytest.fixture
def torch_2_11_names(monkeypatch):
    """This torch without the module-level names torch 2.11 lacks (restored after the test;
    tensor methods live in a C type, which cannot lose one: the scan above covers them)."""
    for module, names in NEWER_THAN_2_11.items():
        for name in names:
            monkeypatch.delattr(importlib.import_module(module), name, raising=False)


def test_fit_checkpoint_and_test_run_without_the_newer_names(torch_2_11_names, tmp_path):
    from trainkit import Trainer

    options = dict(accelerator="cpu", default_root_dir=str(tmp_path), enable_progress_bar=False)
    trainer = Trainer(max_epochs=2, precision="bf16-mixed", **options)
    trainer.fit(Regression(), regression_loader(), regression_loader(seed=1))
    resumed = Trainer(max_epochs=3, precision="bf16-mixed", **options)
    resumed.fit(Regression(), regression_loader(), ckpt_path="last")
    assert resumed.current_epoch == 3
    (result,) = resumed.test(Regression(), regression_loader(), ckpt_path="last", verbose=False)
    assert result["test_loss"] >= 0


def test_the_running_torch_is_one_trainkit_supports():
    version = tuple(int(part) for part in torch.__version__.split("+")[0].split(".")[:2])
    assert version >= OLDEST_TORCH, torch.__version__


@pytest.mark.skipif(
    not torch.__version__.startswith("2.11."), reason="checks the list against torch 2.11 itself"
)
def test_torch_2_11_lacks_every_name_listed_as_newer():
    present = [
        f"{module}.{name}"
        for module, names in NEWER_THAN_2_11.items()
        for name in names
        if hasattr(importlib.import_module(module), name)
    ]
    present += [f"torch.Tensor.{n}" for n in NEWER_TENSOR_METHODS if hasattr(torch.Tensor, n)]
    assert not present, f"torch {torch.__version__} has them: drop them from NEWER_THAN_2_11"


def test_deterministic_sets_the_cublas_workspace_on_a_cuda_build(monkeypatch):
    from trainkit.trainer.arguments import apply_torch_flags

    monkeypatch.delenv("CUBLAS_WORKSPACE_CONFIG", raising=False)
    monkeypatch.setattr(torch.version, "cuda", "13.0")  # what the GPU machine's torch says
    try:
        apply_torch_flags(True, None)
    finally:
        torch.use_deterministic_algorithms(False)
    assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":4096:8"
    monkeypatch.setenv("CUBLAS_WORKSPACE_CONFIG", ":16:8")  # a user's choice is kept
    try:
        apply_torch_flags(True, None)
    finally:
        torch.use_deterministic_algorithms(False)
    assert os.environ["CUBLAS_WORKSPACE_CONFIG"] == ":16:8"
