"""Accelerators at Lightning's path: ``Trainer(accelerator=CUDAAccelerator())`` and the
questions a program asks before building a Trainer."""

from __future__ import annotations

import pytest
import torch

from tests.helpers.models import Regression, regression_loader
from trainkit import Trainer
from trainkit.accelerators import (
    Accelerator,
    CPUAccelerator,
    CUDAAccelerator,
    find_usable_cuda_devices,
)
from trainkit.errors import ConfigError


def test_the_cpu_accelerator():
    cpu = CPUAccelerator()
    assert isinstance(cpu, Accelerator) and CPUAccelerator.is_available()
    assert CPUAccelerator.parse_devices(2) == 2
    assert CPUAccelerator.get_parallel_devices(2) == [torch.device("cpu")] * 2
    stats = cpu.get_device_stats("cpu")
    assert set(stats) == {"cpu_vm_percent", "cpu_percent", "cpu_swap_percent"}


def test_an_accelerator_object_is_a_trainer_argument(tmp_path):
    trainer = Trainer(
        accelerator=CPUAccelerator(),  # type: ignore[arg-type]
        devices=1,
        max_steps=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        default_root_dir=str(tmp_path),
    )
    trainer.fit(Regression(), regression_loader())
    assert trainer.strategy.root_device == torch.device("cpu") and trainer.global_step == 1


def test_what_the_cuda_accelerator_says_on_this_machine():
    visible = torch.cuda.device_count()
    assert CUDAAccelerator.is_available() == (visible > 0)
    assert CUDAAccelerator.auto_device_count() == visible
    assert find_usable_cuda_devices(0) == []
    assert len(find_usable_cuda_devices()) <= visible
    with pytest.raises(ValueError, match="GPUs are visible"):
        find_usable_cuda_devices(visible + 1)


@pytest.mark.skipif(torch.cuda.is_available(), reason="on a machine without CUDA")
def test_asking_for_cuda_without_a_gpu_is_one_clear_line():
    with pytest.raises(ConfigError, match="no CUDA device"):
        Trainer(accelerator=CUDAAccelerator(), devices=1)  # type: ignore[arg-type]


@pytest.mark.gpu
def test_train_on_the_gpus_found_usable(tmp_path):
    devices = find_usable_cuda_devices(1)
    assert devices == CUDAAccelerator.parse_devices(devices)
    trainer = Trainer(
        accelerator=CUDAAccelerator(),  # type: ignore[arg-type]
        devices=devices,
        max_steps=1,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        default_root_dir=str(tmp_path),
    )
    trainer.fit(Regression(), regression_loader())
    assert trainer.strategy.root_device.type == "cuda"
    assert "allocated_bytes.all.current" in CUDAAccelerator().get_device_stats(devices[0])
