"""What changed between the run that saved a checkpoint and the run resuming it.

Both runs are described the same way, as flat ``key: value`` settings: the CLI config (or,
without one, the model's and datamodule's hyperparameters), the precision, the world size and the
optimizer classes. A change that a resume cannot carry through correctly is refused, naming the
key, unless the user accepts it by name (``--allow_resume_changes KEY,...`` or
``TRAINKIT_ALLOW_RESUME_CHANGES``); every other change is shown and the run goes on.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from trainkit.checkpoint.files import CheckpointError


class HasHparams(Protocol):
    """A module or datamodule: its saved hyperparameters."""

    @property
    def hparams(self) -> Mapping[str, Any]: ...


ALLOW_ENV = "TRAINKIT_ALLOW_RESUME_CHANGES"  # comma-separated keys, or "all"
CHECKED_ENV = "TRAINKIT_RESUME_CHECKED"  # the CLI compared the config before the ranks started

BUILT = ("precision", "world_size", "optimizers")  # what the run built, beside its config

# keys of the CLI config that say how this run was started, not what it trains
IGNORED = frozenset({"ckpt_path", "config", "allow_resume_changes", "dry_run"})

# changes that leave the saved optimizer state wrong to continue from, judged by what the run
# built (a config may not say); a model argument that builds the module differently shows as
# weights that do not fit, and that refusal names the model arguments that changed
BREAKING_PREFIXES = ("optimizers", "precision")
WHY = {
    "optimizers": "the saved optimizer state belongs to the saved optimizer class",
    "precision": "the saved optimizer and scaler state were kept in the saved precision",
}
SHOWN_WIDTH = 48  # characters of a value in the table


@dataclass(frozen=True)
class Change:
    """One setting that differs: its key, the saved value and the value now (None: absent)."""

    key: str
    saved: str | None
    now: str | None

    @property
    def breaking(self) -> str | None:
        """Why a resume cannot carry this change through (None: it can). A setting only one
        side has (an argument added to the code with its default, or removed) is not one: the
        shape check of the weights still names a module built differently."""
        if self.saved is None or self.now is None:
            return None
        for prefix in BREAKING_PREFIXES:
            if self.key == prefix or self.key.startswith(prefix):
                return WHY[prefix]
        return None


@dataclass(frozen=True)
class RunSettings:
    """A run described as flat ``key: value`` settings, and whether they came from a CLI config."""

    values: dict[str, str]
    from_config: bool

    def only(self, keys: Iterable[str]) -> RunSettings:
        """These settings restricted to ``keys``."""
        kept = set(keys)
        return RunSettings({k: v for k, v in self.values.items() if k in kept}, self.from_config)


def settings(checkpoint: Mapping[str, Any]) -> RunSettings:
    """The settings of the run a checkpoint-shaped mapping describes (keys it lacks are left
    out, so an older checkpoint compares on what it has)."""
    flat: dict[str, str] = {}
    config = checkpoint.get("config")
    if config:
        import yaml

        _flatten(yaml.safe_load(config) or {}, "", flat)
    else:
        _flatten(checkpoint.get("hyper_parameters") or {}, "model.", flat)
        _flatten(checkpoint.get("datamodule_hyper_parameters") or {}, "data.", flat)
    for key in ("precision", "world_size"):
        if checkpoint.get(key) is not None:
            flat[key] = str(checkpoint[key])
    if checkpoint.get("optimizer_classes") is not None:
        flat["optimizers"] = ", ".join(checkpoint["optimizer_classes"])
    for key in IGNORED:
        flat.pop(key, None)
    return RunSettings(flat, from_config=bool(config))


def run_settings(
    config: str | None,
    module: HasHparams,
    datamodule: HasHparams | None,
    precision: str,
    world_size: int,
    optimizer_classes: list[str] | None,
) -> RunSettings:
    """The settings of the run now, described as its checkpoint would describe it."""
    from trainkit.checkpoint.files import plain_hparams

    return settings(
        {
            "config": config,
            "hyper_parameters": plain_hparams(module.hparams),
            "datamodule_hyper_parameters": plain_hparams(datamodule.hparams)
            if datamodule is not None
            else None,
            "precision": precision,
            "world_size": world_size,
            "optimizer_classes": optimizer_classes,
        }
    )


def check(
    checkpoint: Mapping[str, Any], now: RunSettings, path: str, show: bool, only_built: bool
) -> None:
    """Compare the run now with the checkpoint's: print the changes (``show``) and refuse a
    breaking one the user did not accept; ``only_built``: compare only the optimizers."""
    saved = settings(checkpoint)
    if only_built:
        saved, now = saved.only(["optimizers"]), now.only(["optimizers"])
    elif saved.from_config != now.from_config:  # a config against hyperparameters: no like
        saved, now = saved.only(BUILT), now.only(BUILT)
    found = changes(saved.values, now.values)
    if not found:
        return
    if show:
        print(table(found), flush=True)
    refuse_breaking(found, allowed_keys(), path)


def model_changes(checkpoint: Mapping[str, Any], now: RunSettings) -> str:
    """``"; changed since it was saved: model.x 8 -> 16, ..."`` for the model's settings that
    differ (the likely cause of weights that do not fit), or ""."""
    found = [
        c for c in changes(settings(checkpoint).values, now.values) if c.key.startswith("model.")
    ]
    if not found:
        return ""
    listed = ", ".join(f"{c.key} {_shown(c.saved)} -> {_shown(c.now)}" for c in found)
    return f"; changed since it was saved: {listed}"


def checked() -> bool:
    """Whether the CLI already compared the settings before the ranks started."""
    return os.environ.get(CHECKED_ENV) == "1"


def _flatten(tree: object, prefix: str, into: dict[str, str]) -> None:
    if isinstance(tree, Mapping) and tree:
        for key, value in tree.items():
            _flatten(value, f"{prefix}{key}.", into)
    else:
        into[prefix.rstrip(".")] = json.dumps(tree, default=str)


def changes(saved: Mapping[str, str], now: Mapping[str, str]) -> list[Change]:
    """The settings that differ, in key order; what the run built (precision, world size,
    optimizers) is compared only where the checkpoint recorded it."""
    keys = sorted((set(saved) | set(now)) - {k for k in BUILT if k not in saved or k not in now})
    return [
        Change(key, saved.get(key), now.get(key)) for key in keys if saved.get(key) != now.get(key)
    ]


def allowed_keys(environ: Mapping[str, str] = os.environ) -> frozenset[str]:
    """The keys the user accepted changing (``all``: every key)."""
    return frozenset(key.strip() for key in environ.get(ALLOW_ENV, "").split(",") if key.strip())


def table(found: Iterable[Change]) -> str:
    """A short table for the user: key, saved value, value now."""
    rows = [(c.key, _shown(c.saved), _shown(c.now)) for c in found]
    width = max(len(row[0]) for row in rows)
    lines = ["trainkit: resuming a run whose settings changed since the checkpoint (saved -> now):"]
    lines += [f"  {key:<{width}}  {saved} -> {now}" for key, saved, now in rows]
    return "\n".join(lines)


def _shown(value: str | None) -> str:
    if value is None:
        return "(absent)"
    return value if len(value) <= SHOWN_WIDTH else value[: SHOWN_WIDTH - 3] + "..."


def refuse_breaking(found: Iterable[Change], allowed: frozenset[str], path: str) -> None:
    """Raise a one-line CheckpointError for the first breaking change not accepted by name."""
    for change in found:
        if change.breaking is None or change.key in allowed or "all" in allowed:
            continue
        raise CheckpointError(
            f"cannot resume {path!r}: {change.key} changed from {_shown(change.saved)} to "
            f"{_shown(change.now)} ({change.breaking}); expected the saved value; restore it, "
            f"or accept the change with --allow_resume_changes {change.key} "
            f"(or {ALLOW_ENV}={change.key})"
        )
