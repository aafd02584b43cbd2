"""Device specs resolve to explicit lists, or fail with one line naming the value and the fix."""

from __future__ import annotations

import pytest

from trainkit.devices import resolve_devices
from trainkit.errors import ConfigError

GPU_TABLE = [
    (0, "cpu", (0,)),
    (2, "gpu", (0, 1)),
    (-1, "gpu", (0, 1, 2, 3)),
    ("-1", "gpu", (0, 1, 2, 3)),
    ([0], "gpu", (0,)),
    ([1, 3], "gpu", (1, 3)),
    ((2,), "gpu", (2,)),
    ("0", "gpu", (0,)),
    ("0,", "gpu", (0,)),
    ("3", "gpu", (3,)),
    ("1,3", "gpu", (1, 3)),
    ("0, 1", "gpu", (0, 1)),
    ("0-3", "gpu", (0, 1, 2, 3)),
    ("0-1,3", "gpu", (0, 1, 3)),
    ("auto", "gpu", (0, 1, 2, 3)),
]


@pytest.mark.parametrize(("spec", "accelerator", "ids"), GPU_TABLE)
def test_gpu_spec_table(spec, accelerator, ids):
    selection = resolve_devices(spec, "gpu", available_gpus=4)
    assert (selection.accelerator, selection.ids) == (accelerator, ids)


@pytest.mark.parametrize(("spec", "count"), [(1, 1), (4, 4), ("auto", 1), (0, 1), (None, 1)])
def test_on_cpu_devices_count_processes(spec, count):
    selection = resolve_devices(spec, "cpu")
    assert selection.accelerator == "cpu" and selection.count == count


def test_devices_0_and_gpus_0_both_mean_one_cpu_process():
    assert resolve_devices(0, "auto", available_gpus=2) == resolve_devices(0, "cpu")
    assert resolve_devices(None, "auto", gpus=0, available_gpus=2) == resolve_devices(0, "cpu")


@pytest.mark.parametrize("spec", ["0", "1,3", "0-2", [0, 1], (0,), "2"])
def test_on_cpu_device_ids_are_rejected_not_counted(spec):
    with pytest.raises(ConfigError, match="name GPUs; on CPU write devices: N"):
        resolve_devices(spec, "cpu")


def test_auto_accelerator_uses_cpu_without_gpus():
    assert resolve_devices("auto", "auto", available_gpus=0).accelerator == "cpu"
    assert resolve_devices(2, "auto", available_gpus=2).ids == (0, 1)


def test_gpus_is_the_older_spelling_of_gpu_devices():
    assert resolve_devices(gpus="1,2", available_gpus=4).ids == (1, 2)


@pytest.mark.parametrize(
    ("spec", "hint"),
    [
        ("0,0", "listed twice"),
        ([1, 1], "listed twice"),
        ("3-1", "reversed"),
        ("-3", "cannot be negative"),
        (-2, "cannot be negative"),
        ([], "empty list"),
        ("", "empty entry"),
        ("0,,1", "empty entry"),
        ("a,b", "not a device id"),
        ([0, -1], "cannot be negative"),
        (True, "not true/false"),
        ("0-5", "do not exist"),
        ([4], "do not exist"),
    ],
)
def test_invalid_specs_name_the_value_forms_and_fix(spec, hint):
    with pytest.raises(ConfigError) as info:
        resolve_devices(spec, "gpu", available_gpus=4)
    message = str(info.value)
    assert repr(spec) in message and "expected" in message and hint in message
    assert "\n" not in message


def test_gpu_on_a_machine_without_cuda_says_how_to_use_cpu():
    with pytest.raises(ConfigError, match="accelerator: cpu"):
        resolve_devices(1, "gpu", available_gpus=0)


def test_bad_accelerator():
    with pytest.raises(ConfigError, match="'tpu'"):
        resolve_devices(1, "tpu")
