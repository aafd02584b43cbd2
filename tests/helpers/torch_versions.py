"""The public torch names newer than the oldest torch trainkit supports (the GPU machine's),
which trainkit must not use without a fallback."""

from __future__ import annotations

OLDEST_TORCH = (2, 11)  # the GPU machine's (Python 3.12, CUDA 13)

# module -> public names added after torch 2.11 (present in 2.13)
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
NEWER_TENSOR_METHODS = ("const_data_ptr",)  # torch.Tensor's, found the same way
