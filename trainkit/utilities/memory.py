"""Out-of-memory checks and freeing memory: what a batch-size search or a retry loop needs."""

from __future__ import annotations

import gc
from typing import Any

import torch
from lightning_utilities.core.apply_func import apply_to_collection

__all__ = [
    "apply_to_collection",
    "garbage_collection_cuda",
    "is_cuda_out_of_memory",
    "is_cudnn_snafu",
    "is_oom_error",
    "is_out_of_cpu_memory",
    "recursive_detach",
]


def recursive_detach(in_dict: Any, to_cpu: bool = False) -> Any:
    """``in_dict`` (any nesting of dicts, lists, tuples) with every tensor detached, and moved
    to the CPU with ``to_cpu``."""

    def detach(tensor: torch.Tensor) -> torch.Tensor:
        tensor = tensor.detach()
        return tensor.cpu() if to_cpu else tensor

    return apply_to_collection(in_dict, torch.Tensor, detach)


def is_cuda_out_of_memory(exception: BaseException) -> bool:
    """Whether ``exception`` is CUDA running out of memory."""
    if isinstance(exception, torch.cuda.OutOfMemoryError):
        return True
    message = str(exception)
    return isinstance(exception, RuntimeError) and "CUDA" in message and "out of memory" in message


def is_cudnn_snafu(exception: BaseException) -> bool:
    """Whether ``exception`` is cuDNN failing for lack of memory (it says so only indirectly)."""
    return isinstance(
        exception, RuntimeError
    ) and "cuDNN error: CUDNN_STATUS_NOT_SUPPORTED." in str(exception)


def is_out_of_cpu_memory(exception: BaseException) -> bool:
    """Whether ``exception`` is an allocation on the CPU failing."""
    message = str(exception)
    return (
        isinstance(exception, RuntimeError)
        and "DefaultCPUAllocator: can't allocate memory" in message
    )


def is_oom_error(exception: BaseException) -> bool:
    """Whether ``exception`` is any of the out-of-memory errors above."""
    return (
        is_cuda_out_of_memory(exception)
        or is_cudnn_snafu(exception)
        or is_out_of_cpu_memory(exception)
    )


def garbage_collection_cuda() -> None:
    """Collect garbage, then give cached CUDA memory back (an out-of-memory there is ignored)."""
    gc.collect()
    if not torch.cuda.is_available():
        return
    try:
        torch.cuda.empty_cache()
    except RuntimeError as exception:
        if not is_oom_error(exception):
            raise
