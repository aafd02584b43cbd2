"""Every trainkit module imports, in a new interpreter, under a torch without the names
newer than 2.11."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from tests.helpers.command_env import REPO, cli_env

NEWER_THAN_2_11: dict[str, tuple[str, ...]] = {
    "torch": ("thread_safe_generator",),
    "torch.nn": ("LinearCrossEntropyLoss", "LinearCrossEntropyOptions"),
    "torch.nn.functional": ("linear_cross_entropy",),
    "torch.distributed": ("all_gather_single", "reduce_scatter_single", "record_comm"),
    "torch.distributed.fsdp": ("DataParallelMeshDims",),
    "torch.distributed.checkpoint.state_dict": ("HYBRID_SHARDING_STRATEGIES",),
    "torch.cuda": ("caching_allocator_disabled", "current_solver_handle"),
    "torch.optim": ("swap_in_optimizer_params_and_state",),
    "torch.utils.checkpoint": ("SavedTensor",),
    "torch.autograd": ("enforce_grad_layout_policy",),
    "torch.compiler": ("CacheInfo", "get_default_backend", "set_default_backend"),
    "torch._dynamo": (
        "allow_c_slot",
        "bytecode_debugger",
        "comprehension_graph_break",
        "override_cudagraphs",
        "override_optimization_hint",
    ),
    "torch.accelerator": ("Graph", "empty_host_cache", "graphs"),
    "torch.backends.cuda": (
        "blas_workspace_size",
        "cublas_workspace_size",
        "cublaslt_workspace_size",
        "is_ck_sdpa_available",
    ),
    "torch.fx": ("tensor_type",),
}


@pytest.mark.slow  # a new interpreter: every trainkit module imported with the names deleted
def test_every_trainkit_module_imports_without_the_newer_names():
    program = textwrap.dedent(f"""
        import importlib, pkgutil, sys
        import torch
        newer = {NEWER_THAN_2_11!r}
        for module, names in newer.items():
            for name in names:
                if hasattr(importlib.import_module(module), name):
                    delattr(importlib.import_module(module), name)
        deleted = [name for names in newer.values() for name in names]
        import trainkit
        failed = []
        for info in pkgutil.walk_packages(trainkit.__path__, "trainkit."):
            try:
                importlib.import_module(info.name)
            except ImportError as error:  # an optional package (horovod...) missing is fine
                if any(name in str(error) for name in deleted):
                    failed.append(f"{{info.name}}: {{error}}")
        print("\\n".join(failed))
        sys.exit(1 if failed else 0)
    """)
    result = subprocess.run(
        [sys.executable, "-c", program],
        capture_output=True,
        text=True,
        timeout=360,
        env=cli_env(),
        cwd=REPO,
    )
    assert result.returncode == 0, result.stdout + result.stderr
