"""A checkpoint copied to host memory: every tensor detached and copied, every container rebuilt,
so later optimizer steps cannot change what a background writer is writing."""

from __future__ import annotations

import copy
from typing import Any

import torch


class HostSnapshot:
    """Copies checkpoints to host memory, reusing the buffers of the previous copy.

    Reusing them turns all but the first copy into plain memcpys (no page faults, no pinned
    allocation on GPU hosts); it is safe because the caller starts a copy only once the writer of
    the previous one has finished. Tensors that share memory (tied weights) stay shared.
    """

    def __init__(self) -> None:
        self._buffers: list[torch.Tensor] = []
        self._used = 0
        self._memo: dict[tuple, torch.Tensor] = {}
        self._cuda = False

    def take(self, obj: object) -> Any:
        """``obj`` with its tensors copied into host buffers (returns once the copies are done)."""
        self._used, self._memo, self._cuda = 0, {}, False
        try:
            result = self._copy(obj)
            if self._cuda:
                torch.cuda.synchronize()  # the non-blocking device-to-host copies have landed
        finally:
            self._memo = {}
        del self._buffers[self._used :]
        return result

    def release(self) -> None:
        """Free the buffers (the next copy allocates again)."""
        self._buffers.clear()

    @property
    def nbytes(self) -> int:
        """Host memory the kept buffers hold."""
        return sum(b.untyped_storage().nbytes() for b in self._buffers)

    def _copy(self, obj: object) -> Any:
        if isinstance(obj, torch.Tensor):
            return self._tensor(obj)
        if isinstance(obj, dict):
            new = copy.copy(obj)  # keeps the type and attributes (a state_dict's _metadata)
            for key, value in obj.items():
                new[key] = self._copy(value)
            return new
        if isinstance(obj, list):
            return [self._copy(item) for item in obj]
        if isinstance(obj, tuple):
            items = [self._copy(item) for item in obj]
            return type(obj)(*items) if hasattr(obj, "_fields") else type(obj)(items)
        return obj  # numbers, strings, None: immutable

    def _tensor(self, tensor: torch.Tensor) -> torch.Tensor:
        tensor = tensor.detach()
        if tensor.is_sparse or tensor.is_quantized or tensor.is_nested or tensor.is_meta:
            return tensor.to("cpu", copy=True)
        key = (
            tensor.device,
            tensor.untyped_storage().data_ptr(),
            tensor.storage_offset(),
            tuple(tensor.shape),
            tensor.stride(),
            tensor.dtype,
        )
        if key in self._memo:
            return self._memo[key]
        buffer = self._buffer_like(tensor)
        on_device = tensor.device.type == "cuda"
        self._cuda = self._cuda or on_device
        buffer.copy_(tensor, non_blocking=on_device)
        self._memo[key] = buffer
        return buffer

    def _buffer_like(self, tensor: torch.Tensor) -> torch.Tensor:
        index = self._used
        self._used += 1
        if index < len(self._buffers):
            old = self._buffers[index]
            if old.shape == tensor.shape and old.dtype == tensor.dtype:
                return old
        pin = tensor.device.type == "cuda"
        buffer = torch.empty(tensor.shape, dtype=tensor.dtype, device="cpu", pin_memory=pin)
        if index < len(self._buffers):
            self._buffers[index] = buffer
        else:
            self._buffers.append(buffer)
        return buffer
