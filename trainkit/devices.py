"""Turn a ``devices``/``gpus`` spec into an explicit device list, or fail with one clear line.

=========  ==================  ===========================================
spec       on GPU              meaning
=========  ==================  ===========================================
``0``      no GPU              an int counts devices: 0 means none (CPU)
``2``      ``[0, 1]``          the first 2 devices
``-1``     every visible GPU   also ``"-1"``
``[0]``    ``[0]``             a list names device ids: the first device
``"0"``    ``[0]``             a string names ids: the first device
``"0,"``   ``[0]``             same as ``"0"``
``"1,3"``  ``[1, 3]``          ids separated by commas (spaces allowed)
``"0-3"``  ``[0, 1, 2, 3]``    inclusive ranges, mixable: ``"0-1,4"``
``auto``   every visible GPU   one CPU process when there is no GPU
=========  ==================  ===========================================

On CPU, ``devices`` counts processes: ``N`` runs N, ``0`` and ``auto`` one, ``-1`` one per core;
device ids (lists, id strings) name GPUs and are rejected on CPU. ``gpus: 0`` and ``devices: 0``
both mean no GPU: one CPU process.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from trainkit.errors import ConfigError

FORMS = "an int (count, -1 = all), a list of ids, a string like '0,1', '0-3' or '0-1,4', or 'auto'"
ACCELERATORS = ("auto", "cpu", "gpu", "cuda")
MAX_DEVICES = 1024  # per node: ids and counts beyond this are typos, not machines


def max_cpu_processes() -> int:
    """CPU processes one node may start: a few per core, at least 32."""
    return max(32, 4 * (os.cpu_count() or 1))


@dataclass(frozen=True)
class DeviceSelection:
    """What a run uses on this node: ``accelerator`` and device ids (process slots on CPU)."""

    accelerator: str
    ids: tuple[int, ...]

    @property
    def count(self) -> int:
        return len(self.ids)


def visible_gpus() -> int:
    """How many CUDA devices this process can see (0 without importing torch when none can be)."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) == "":
        return 0
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def normalize_accelerator(accelerator: str) -> str:
    """The accelerator's canonical name; an Accelerator object (trainkit.accelerators) counts
    as its ``name``."""
    value = str(getattr(accelerator, "name", accelerator)).strip().lower()
    if value not in ACCELERATORS:
        raise ConfigError("trainer.accelerator", accelerator, "'auto', 'cpu' or 'gpu'")
    return "gpu" if value == "cuda" else value


def resolve_devices(
    devices: int | str | list[int] | tuple[int, ...] | None = "auto",
    accelerator: str = "auto",
    gpus: int | str | list[int] | None = None,
    available_gpus: int | None = None,
) -> DeviceSelection:
    """Resolve ``accelerator`` + ``devices`` (or the older ``gpus``) to an explicit selection."""
    accelerator = normalize_accelerator(accelerator)
    if gpus is not None:
        if accelerator == "cpu" and gpus != 0:
            raise ConfigError(
                "trainer.gpus", gpus, "no gpus with accelerator 'cpu'", "drop one of them"
            )
        accelerator, devices, key = "gpu", gpus, "trainer.gpus"
    else:
        key = "trainer.devices"
    available = (
        visible_gpus() if available_gpus is None and accelerator != "cpu" else available_gpus or 0
    )
    if accelerator == "auto":
        accelerator = "gpu" if available > 0 else "cpu"
    if accelerator == "cpu":
        return DeviceSelection("cpu", _cpu_slots(devices, key))
    if devices == 0 and not isinstance(devices, str | bool):
        return DeviceSelection("cpu", (0,))
    if available == 0 and key != "trainer.gpus":  # accelerator: gpu is what cannot be
        raise ConfigError(
            "trainer.accelerator",
            accelerator,
            "'cpu' or 'auto' on this machine, which has no CUDA device",
            "use accelerator: cpu or auto (devices: N runs N processes)",
        )
    if available == 0:
        raise ConfigError(
            key,
            devices,
            "a GPU count or ids on a machine with CUDA",
            "this machine has no CUDA device; use accelerator: cpu (devices: N runs N processes)",
        )
    ids = parse_device_ids(devices, available, key)
    beyond = [i for i in ids if i >= available]
    if beyond:
        raise ConfigError(
            key,
            devices,
            f"ids below {available} ({available} GPUs visible)",
            f"ids {beyond} do not exist; pick from 0-{available - 1} or use -1 for all",
        )
    return DeviceSelection("gpu", ids)


def _cpu_slots(devices: object, key: str) -> tuple[int, ...]:
    """CPU process slots: ``devices`` counts processes on CPU (0 and 'auto' mean one, -1 one per
    core); device ids name GPUs, so they are an error here rather than a silent count."""
    if devices in ("auto", None, 0) and not isinstance(devices, bool):
        return (0,)
    if devices in (-1, "-1"):
        return tuple(range(os.cpu_count() or 1))
    if isinstance(devices, bool) or not isinstance(devices, int):
        raise ConfigError(
            key,
            devices,
            "a process count on CPU (an int, -1 for one per core, or 'auto')",
            "device ids like '1,3', [0, 1] or '0-3' name GPUs; on CPU write devices: N for N "
            "processes, or use accelerator: gpu on a machine with GPUs",
        )
    ids = parse_device_ids(devices, None, key)
    if len(ids) > max_cpu_processes():
        raise ConfigError(
            key,
            devices,
            f"at most {max_cpu_processes()} CPU processes on this machine ({os.cpu_count()} cores)",
            "use fewer processes",
        )
    return tuple(range(len(ids)))


def parse_device_ids(
    spec: object, available: int | None, key: str = "trainer.devices"
) -> tuple[int, ...]:
    """Parse one spec to ids; ``available`` resolves -1/auto (None: no GPU count known)."""
    if isinstance(spec, bool):
        raise ConfigError(key, spec, FORMS, "write a number, not true/false")
    if spec == "auto" or spec is None:
        return tuple(range(available or 0))
    if isinstance(spec, int):
        if spec == -1:
            return tuple(range(available if available is not None else os.cpu_count() or 1))
        if spec < 0:
            raise ConfigError(key, spec, FORMS, "counts cannot be negative; -1 means all")
        _check_size(spec, spec, key)
        return tuple(range(spec))
    if isinstance(spec, list | tuple):
        if not spec:
            raise ConfigError(key, spec, FORMS, "an empty list selects nothing; use 0 for none")
        ids = [_as_id(item, spec, key) for item in spec]
        return _unique(ids, spec, key)
    if isinstance(spec, str):
        return _parse_string(spec, available, key)
    raise ConfigError(key, spec, FORMS)


def _parse_string(spec: str, available: int | None, key: str) -> tuple[int, ...]:
    text = spec.strip()
    if text == "-1":
        return parse_device_ids(-1, available, key)
    if text == "auto":
        return parse_device_ids("auto", available, key)
    parts = [p.strip() for p in text.split(",")]
    if parts and parts[-1] == "" and len(parts) > 1:
        parts = parts[:-1]
    if not parts or any(p == "" for p in parts):
        raise ConfigError(key, spec, FORMS, "remove the empty entry")
    ids: list[int] = []
    for part in parts:
        low, sep, high = part.partition("-")
        if sep and low.strip():
            start, stop = _as_id(low.strip(), spec, key), _as_id(high.strip(), spec, key)
            if stop < start:
                raise ConfigError(
                    key, spec, FORMS, f"range {part!r} is reversed; write {stop}-{start}"
                )
            _check_size(len(ids) + stop - start + 1, spec, key)
            ids.extend(range(start, stop + 1))
        else:
            ids.append(_as_id(part, spec, key))
    return _unique(ids, spec, key)


def _as_id(item: object, spec: object, key: str) -> int:
    if isinstance(item, bool):
        raise ConfigError(key, spec, FORMS)
    try:
        value = int(item)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        raise ConfigError(key, spec, FORMS, f"{item!r} is not a device id") from None
    if value < 0:
        raise ConfigError(key, spec, FORMS, f"device ids cannot be negative ({value})")
    _check_size(value + 1, spec, key)
    return value


def _check_size(count: int, spec: object, key: str) -> None:
    if count > MAX_DEVICES:
        raise ConfigError(
            key, spec, f"at most {MAX_DEVICES} devices per node", "check the number for a typo"
        )


def _unique(ids: list[int], spec: object, key: str) -> tuple[int, ...]:
    seen = [i for n, i in enumerate(ids) if i in ids[:n]]
    if seen:
        raise ConfigError(key, spec, FORMS, f"device {seen[0]} is listed twice")
    return tuple(ids)


def parse_devices(spec: object, accelerator: str = "auto") -> DeviceSelection:
    """Shorthand for ``resolve_devices(spec, accelerator)``."""
    return resolve_devices(spec, accelerator)  # type: ignore[arg-type]
