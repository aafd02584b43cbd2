"""Accelerators (Lightning's ``accelerators``): what kind of device a run uses.

``Trainer(accelerator=CUDAAccelerator())`` is ``Trainer(accelerator="cuda")``; the classes also
answer questions a program asks before building a Trainer (``CUDAAccelerator.is_available()``,
``find_usable_cuda_devices(2)``) and give device statistics (``DeviceStatsMonitor``).
"""

from __future__ import annotations

from typing import Any

import torch

from trainkit.devices import DeviceSelection, parse_device_ids, resolve_devices, visible_gpus

__all__ = ["Accelerator", "CPUAccelerator", "CUDAAccelerator", "find_usable_cuda_devices"]


class Accelerator:
    """A kind of device; ``name`` is what ``Trainer(accelerator=...)`` reads from it."""

    name = "auto"

    def setup_device(self, device: torch.device) -> None:
        """Prepare ``device`` for this process (CUDA: make it current)."""

    def teardown(self) -> None:
        """Release what ``setup_device`` took."""

    @staticmethod
    def is_available() -> bool:
        raise NotImplementedError

    @staticmethod
    def auto_device_count() -> int:
        raise NotImplementedError

    def selection(self, devices: object) -> DeviceSelection:
        """``devices`` (as ``Trainer(devices=...)`` takes them) resolved on this machine."""
        return resolve_devices(devices, self.name)  # type: ignore[arg-type]

    def get_device_stats(self, device: torch.device | str | int) -> dict[str, Any]:
        raise NotImplementedError


class CPUAccelerator(Accelerator):
    """Processes on the CPU (``devices: N`` runs N of them)."""

    name = "cpu"

    @staticmethod
    def is_available() -> bool:
        return True

    @staticmethod
    def auto_device_count() -> int:
        return 1

    @staticmethod
    def parse_devices(devices: int | str | list[int]) -> int:
        """How many CPU processes ``devices`` asks for."""
        return resolve_devices(devices, "cpu").count

    @staticmethod
    def get_parallel_devices(devices: int | str | list[int]) -> list[torch.device]:
        return [torch.device("cpu")] * CPUAccelerator.parse_devices(devices)

    def get_device_stats(self, device: torch.device | str | int) -> dict[str, float]:
        """This machine's CPU and memory use (needs ``pip install psutil``)."""
        try:
            import psutil
        except ImportError:
            raise ModuleNotFoundError(
                "CPU device statistics need psutil: pip install psutil"
            ) from None
        return {
            "cpu_vm_percent": psutil.virtual_memory().percent,
            "cpu_percent": psutil.cpu_percent(),
            "cpu_swap_percent": psutil.swap_memory().percent,
        }


class CUDAAccelerator(Accelerator):
    """NVIDIA GPUs through CUDA."""

    name = "cuda"

    def setup_device(self, device: torch.device) -> None:
        if device.type != "cuda":
            raise ValueError(f"CUDAAccelerator.setup_device: {device}; expected a cuda device")
        torch.cuda.set_device(device)

    def teardown(self) -> None:
        torch.cuda.empty_cache()

    @staticmethod
    def is_available() -> bool:
        return visible_gpus() > 0

    @staticmethod
    def auto_device_count() -> int:
        return visible_gpus()

    @staticmethod
    def parse_devices(devices: int | str | list[int]) -> list[int]:
        """The GPU ids ``devices`` names (``2``: the first two, ``"1,3"``, ``[0]``, ``-1``: all)."""
        return list(parse_device_ids(devices, visible_gpus(), "devices"))

    @staticmethod
    def get_parallel_devices(devices: list[int]) -> list[torch.device]:
        return [torch.device("cuda", index) for index in devices]

    def get_device_stats(self, device: torch.device | str | int) -> dict[str, Any]:
        """``torch.cuda.memory_stats`` of ``device``."""
        return torch.cuda.memory_stats(device)


def find_usable_cuda_devices(num_devices: int = -1) -> list[int]:
    """The ids of ``num_devices`` GPUs that accept work now (-1: all that do); a GPU another
    process holds in exclusive mode is skipped. A RuntimeError when fewer are usable."""
    if num_devices == 0:
        return []
    visible = visible_gpus()
    if num_devices > visible:
        raise ValueError(
            f"find_usable_cuda_devices({num_devices}): only {visible} GPUs are visible; ask for "
            "fewer, or -1 for all usable ones"
        )
    usable: list[int] = []
    for index in range(visible):
        try:
            torch.tensor(0, device=torch.device("cuda", index))
        except RuntimeError:
            continue
        usable.append(index)
        if len(usable) == num_devices:
            break
    if num_devices > 0 and len(usable) < num_devices:
        raise RuntimeError(
            f"find_usable_cuda_devices({num_devices}): {len(usable)} of {visible} GPUs accept "
            "work (the others are busy or in exclusive mode); ask for fewer"
        )
    return usable
