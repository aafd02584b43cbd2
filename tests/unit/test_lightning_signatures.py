"""Lightning's Trainer, LightningModule, LightningDataModule and Callback, member by member and
hook call by hook call: trainkit has every public member Lightning's classes (and Lightning's own
bases: HyperparametersMixin, ModelHooks, DataHooks, CheckpointHooks) define, with the same kind
(method, classmethod, property, settable property, value) and the same parameters (names, kinds,
order, defaults); and trainkit's loops call every hook with Lightning's arguments, in Lightning's
order, under the same ``trainer.state``.

The dicts below are the only allowance: each difference with its reason, also listed in
docs/compat.md ("Signatures"). Anything else fails, and so does a listed difference that no
longer exists, so the lists stay true."""

from __future__ import annotations

import inspect
import re
from collections import defaultdict
from typing import Any

import pytest
import torch

from tests.helpers.command_env import REPO
from tests.helpers.hook_recording import Call, Recording, record_runs

pl = pytest.importorskip(
    "lightning.pytorch", reason="Lightning is not installed (pip install 'lightning==2.6.*')"
)
pytestmark = pytest.mark.lightning

import trainkit  # noqa: E402 (after the skip, as the comparison needs both)
from trainkit.callbacks import Callback  # noqa: E402

CLASSES = {  # Lightning's class: trainkit's
    "Trainer": (pl.Trainer, trainkit.Trainer),
    "LightningModule": (pl.LightningModule, trainkit.LightningModule),
    "LightningDataModule": (pl.LightningDataModule, trainkit.LightningDataModule),
    "Callback": (pl.Callback, Callback),
}

UNUSED = "trainkit provides no such object"
MEMBER_DIFFERENCES = {
    "Trainer.accelerator": f"Lightning's Accelerator object; {UNUSED}: the device is "
    "`trainer.strategy.root_device`",
    "Trainer.is_last_batch": "trainkit does not fetch a batch ahead to know: compare "
    "`batch_idx + 1` with `trainer.num_training_batches`",
    "Trainer.fit_loop": f"Lightning's loop objects; {UNUSED} (the loops are internal): read "
    "`current_epoch`, `global_step`, `num_training_batches`",
    "Trainer.validate_loop": "as `fit_loop`",
    "Trainer.test_loop": "as `fit_loop`",
    "Trainer.val_check_batch": "an internal of Lightning's validation schedule: read "
    "`val_check_interval` and `check_val_every_n_epoch`",
    "Trainer.enable_autolog_hparams": "the Trainer argument is not supported: hyperparameters "
    "always reach the loggers (`save_hyperparameters(logger=False)` keeps them out)",
    "LightningModule.configure_sharded_model": "deprecated by Lightning for `configure_model`, "
    "the only one trainkit calls",
    "LightningModule.device_mesh": f"ModelParallelStrategy's mesh; {UNUSED}",
    "LightningModule.fabric": f"Lightning Fabric; {UNUSED}",
    "LightningModule.dtype": "read-only: trainkit reads it from the parameters; Lightning's "
    "setter records a dtype for its precision plugins without converting (use `module.to(dtype)`)",
    "LightningModule.train_dataloader": "TrainModule has no placeholders that raise, so "
    '`hasattr(module, "train_dataloader")` tells whether a module has one',
    "LightningModule.val_dataloader": "as `train_dataloader`",
    "LightningModule.test_dataloader": "as `train_dataloader`",
    "LightningModule.predict_dataloader": "as `train_dataloader`",
    "LightningModule.to_onnx": "not provided: call `torch.onnx.export` on the module",
    "LightningModule.to_torchscript": "not provided: call `torch.jit.script` or `torch.jit.trace`",
    "LightningModule.to_tensorrt": "not provided: call `torch_tensorrt.compile`",
    "LightningModule.allow_zero_length_dataloader_with_multiple_devices": "trainkit does not "
    "check for an empty loader on one rank of several",
    "LightningDataModule.allow_zero_length_dataloader_with_multiple_devices": "as on the module",
}

# hooks whose place in the sequence differs from Lightning's (owner.hook: why)
ORDER_DIFFERENCES = {
    "module.train_dataloader": "fit asks for its loaders once at setup, before "
    "`configure_optimizers`: the startup table and LR scaling need the effective batch size; "
    "Lightning asks as each loop starts",
    "module.val_dataloader": "as `train_dataloader`",
    "datamodule.train_dataloader": "as the module's",
    "datamodule.val_dataloader": "as the module's",
    "module.optimizer_step": "trainkit's step runs top-down: `training_step`, backward, then at "
    "the accumulation boundary `on_before_optimizer_step`, clipping, `optimizer_step` (its "
    "closure returns the loss already computed), `on_before_zero_grad`, `optimizer_zero_grad`; "
    "Lightning calls `optimizer_step` first, with `training_step`, zero_grad and backward in its "
    "closure. Gradients are freed right after the step, so evaluation has the memory",
    "module.on_before_zero_grad": "as `optimizer_step`",
    "callback.on_before_zero_grad": "as `optimizer_step`",
    "module.optimizer_zero_grad": "as `optimizer_step`",
    "module.lr_scheduler_step": "epoch-interval schedulers step at the epoch end, after the "
    "module's `on_train_epoch_end`, when the epoch's metrics are known; Lightning steps those "
    "that need no metric at the epoch's last batch, before `on_train_batch_end`",
    "module.configure_optimizers": "on resume the optimizers exist before the checkpoint is "
    "loaded (trainkit restores the whole checkpoint at once), so `on_load_checkpoint` comes "
    "after `configure_optimizers`",
    "callback.teardown": "after a failure trainkit still runs `teardown` (callbacks, module, "
    "data module) after `on_exception`; Lightning runs only `on_exception`",
    "module.teardown": "as `callback.teardown`",
    "datamodule.teardown": "as `callback.teardown`",
}
# hooks called with other arguments than Lightning's (owner.hook: why)
ARGUMENT_DIFFERENCES: dict[str, str] = {}


# ---- members ----------------------------------------------------------------------------------
MISSING = object()


def lightning_members(cls: type) -> dict[str, Any]:
    """Public members of ``cls`` and its Lightning bases (not torch.nn.Module's or object's),
    as stored on the class, then the public attributes its constructor sets."""
    found: dict[str, Any] = {}
    for klass in cls.__mro__:
        if klass.__module__.startswith("lightning."):
            for name, value in vars(klass).items():
                if not name.startswith("_"):
                    found.setdefault(name, value)
    return found


def instance_of(cls: type) -> Any:
    if issubclass(cls, (pl.Trainer, trainkit.Trainer)):
        return cls(accelerator="cpu", devices=1, logger=False, enable_progress_bar=False)
    return cls()


def instance_attributes(cls: type) -> set[str]:
    base = torch.nn.Module() if issubclass(cls, torch.nn.Module) else None
    inherited = set(vars(base)) if base is not None else set()
    return {name for name in vars(instance_of(cls)) if not name.startswith("_")} - inherited


def parameters(function: Any) -> list[tuple[str, str, str]]:
    """(name, kind, default) of each parameter; ``*args``/``**kwargs`` by kind only, since no
    caller can name them."""
    described = []
    for p in inspect.signature(function).parameters.values():
        variadic = p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        name = "*" if variadic else p.name
        default = "" if p.default is p.empty else repr(p.default)
        described.append((name, p.kind.name, default))
    return described


def shape(member: Any) -> tuple[str, object]:
    """What a class member is, and what a caller depends on: its parameters, or whether a
    property can be set."""
    if isinstance(member, property):
        return "property", "settable" if member.fset is not None else "read-only"
    if isinstance(member, classmethod):  # Lightning's restricted classmethod is one too
        return "classmethod", parameters(member.__func__)
    if isinstance(member, staticmethod):
        return "staticmethod", parameters(member.__func__)
    if inspect.isfunction(member):
        return "method", parameters(member)
    return "value", repr(member)


def difference(theirs: Any, ours: Any, our_attributes: set[str], name: str) -> str | None:
    """How trainkit's member differs from Lightning's, or None."""
    if ours is MISSING and name in our_attributes:
        ours = property(lambda self: None, lambda self, value: None)  # a plain attribute
    if ours is MISSING:
        return "missing"
    (kind, detail), (our_kind, our_detail) = shape(theirs), shape(ours)
    if kind == "property" and our_kind == "property":
        if detail == "settable" and our_detail != "settable":
            return "read-only (Lightning's can be set)"
        return None
    if (kind, detail) != (our_kind, our_detail):
        return f"Lightning: {kind} {detail}; trainkit: {our_kind} {our_detail}"
    return None


def member_differences() -> dict[str, str]:
    found = {}
    for label, (theirs, ours) in CLASSES.items():
        our_attributes = instance_attributes(ours)
        members = lightning_members(theirs)
        for name in instance_attributes(theirs) - set(members):
            # a constructor's attribute: readable as an attribute or a property (trainkit keeps
            # the loop limits of a run read-only; docs/compat.md)
            members[name] = property(lambda self: None)
        for name, member in sorted(members.items()):
            ours_static = inspect.getattr_static(ours, name, MISSING)
            found_difference = difference(member, ours_static, our_attributes, name)
            if found_difference is not None:
                found[f"{label}.{name}"] = found_difference
    return found


def test_every_lightning_member_is_trainkits_with_lightnings_signature():
    found = member_differences()
    undocumented = {name: why for name, why in found.items() if name not in MEMBER_DIFFERENCES}
    assert not undocumented, "\n".join(f"{name}: {why}" for name, why in undocumented.items())


def test_every_listed_member_difference_still_exists():
    found = member_differences()
    assert sorted(set(MEMBER_DIFFERENCES) - set(found)) == []


# ---- hook calls -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def recordings(tmp_path_factory) -> dict[str, dict[str, Recording]]:
    """Each program's hook calls under Lightning and under trainkit."""
    import logging
    import warnings

    root = tmp_path_factory.mktemp("hooks")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
        theirs = record_runs(pl, root / "lightning")
    ours = record_runs(trainkit, root / "trainkit")
    return {"lightning": theirs, "trainkit": ours}


def sequence(calls: list[Call], leave_out: set[str]) -> list[str]:
    return [call.name for call in calls if call.name not in leave_out]


def argument_shapes(calls: list[Call]) -> dict[str, set[tuple]]:
    shapes: dict[str, set[tuple]] = defaultdict(set)
    for call in calls:
        shapes[call.name].add((call.args, call.keywords))
    return shapes


def test_each_hook_is_called_with_lightnings_arguments(recordings):
    for program, theirs in recordings["lightning"].items():
        expected = argument_shapes(theirs.calls)
        got = argument_shapes(recordings["trainkit"][program].calls)
        for hook in sorted(set(expected) & set(got) - set(ARGUMENT_DIFFERENCES)):
            assert got[hook] == expected[hook], f"{program}: {hook}"


def test_hooks_are_called_in_lightnings_order(recordings):
    for program, theirs in recordings["lightning"].items():
        ours = recordings["trainkit"][program]
        listed = set(ORDER_DIFFERENCES)
        assert sequence(ours.calls, listed) == sequence(theirs.calls, listed), program


def test_every_listed_hook_difference_still_exists(recordings):
    programs = [
        (recordings["lightning"][p], recordings["trainkit"][p]) for p in recordings["lightning"]
    ]
    for hook in ORDER_DIFFERENCES:
        others = set(ORDER_DIFFERENCES) - {hook}
        assert any(sequence(a.calls, others) != sequence(b.calls, others) for a, b in programs), (
            hook
        )
    for hook in ARGUMENT_DIFFERENCES:
        differs = (
            argument_shapes(a.calls)[hook] != argument_shapes(b.calls)[hook] for a, b in programs
        )
        assert any(differs), hook


def states(recording: Recording, listed: bool) -> list[tuple[str, tuple]]:
    """(hook, trainer state) of the callback hooks listed in ORDER_DIFFERENCES, or of the others."""
    return [(h, s) for h, s in recording.states if (f"callback.{h}" in ORDER_DIFFERENCES) == listed]


def test_trainer_state_in_each_callback_hook_is_lightnings(recordings):
    """``trainer.state`` (fn, stage, status, finished) and ``trainer.training`` /
    ``validating`` / ``testing`` / ``predicting`` / ``sanity_checking`` / ``evaluating``."""
    for program, theirs in recordings["lightning"].items():
        ours = recordings["trainkit"][program]
        assert states(ours, listed=False) == states(theirs, listed=False), program
        expected = set(states(theirs, listed=True))
        assert {s for s in states(ours, listed=True) if s[0] in dict(expected)} == expected


# ---- the page ---------------------------------------------------------------------------------
def signatures_section() -> str:
    page = (REPO / "docs" / "compat.md").read_text()
    return page.split("\n## Signatures\n", 1)[1]


def test_the_page_lists_every_difference_with_the_count():
    section = signatures_section()
    listed = set(re.findall(r"^\| `([\w.]+)` \|", section, flags=re.MULTILINE))
    assert listed == set(MEMBER_DIFFERENCES) | set(ORDER_DIFFERENCES) | set(ARGUMENT_DIFFERENCES)
    count = len(MEMBER_DIFFERENCES)
    assert f"{count} members differ" in section
