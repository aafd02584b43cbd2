"""A differential tester of trainkit against Lightning: small Lightning programs drawn from a
grammar of what real programs do, each run in this process under both frameworks, and what each
run leaves compared.

The grammar: Trainer arguments from their accepted values; ``self.log`` with every
``on_step``/``on_epoch``/``prog_bar``/``logger``/``reduce_fx`` combination Lightning accepts, of
a tensor or a torchmetrics object called or only updated; automatic or manual optimization
(``self.optimizers()``, ``manual_backward``, ``step``/``zero_grad``, schedulers stepped by hand),
one or two optimizers, ``configure_optimizers`` in every return form (an optimizer, a list,
``(optimizers, schedulers)``, a dict with ``lr_scheduler`` a scheduler or a dict with
``interval``/``frequency``/``monitor``, a list or tuple of such dicts) with StepLR,
ExponentialLR or ReduceLROnPlateau; one or two validation loaders; ``on_train_epoch_end`` and
``on_validation_epoch_end`` that log; ``save_hyperparameters`` variants; ModelCheckpoint,
EarlyStopping, LearningRateMonitor and a callback that logs or asks to stop; CSV and TensorBoard
loggers; ``validate``/``test``/``predict`` after the fit; and the LightningCLI path (``fit -c``
a generated YAML). tests/integration/compat/drawn_program.py builds and runs one.

What is compared: the exception class (or exit code), the warnings (category and first words,
once or several times), ``callback_metrics``/``logged_metrics``/progress bar names after the fit
and at the end, ``callback_metrics`` as read in ``on_train_epoch_end`` by the module and a
callback, ``metrics.csv`` (columns, and each row's step and filled columns), TensorBoard steps by
tag, ``hparams.yaml``, the saved config of a CLI run, checkpoint file names and what each holds
(the keys Lightning writes, epoch, step, weights' names, optimizer and scheduler counts,
hyperparameters), ``trainer.*`` read after the run (``READOUT``, the learning rates, the
scheduler configs), the predictions and the final weights.

``scripts/diff_lightning.py --n N`` draws and compares N programs; a bounded sample runs in
``tests/integration/compat/test_differential.py``. A program is a ``Spec`` (JSON, printed with every
difference) and the same seed draws the same programs.

Kept out of the grammar: what docs/compat.md lists as different on purpose (``save_last`` is
always given, since trainkit's default is True; folders are always given, since the default
folder names differ; no ``every_n_epochs``). ``ON_PURPOSE`` is that list as the tester knows it:
a difference it names is reported as such, not as a bug. Metrics are compared by value within
``TOLERANCE``; two runs that both raised, by the error (Lightning's class among the classes of
trainkit's) and where they stopped.
"""

from __future__ import annotations

import dataclasses
import json
import math
import random
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.integration.compat.drawn_program import run

TOLERANCE = 1e-5
LENIENT = "lenient:"  # the line ``compare`` gives where only Lightning raised
STAGES = ("training", "validation", "test")
VALUES = ("loss", "double", "metric_forward", "metric_update")
REDUCE_FX = ("mean", "sum", "max", "min")
FORMS = (
    "optimizer",  # an optimizer (two: a list)
    "list",  # [optimizers]
    "lists",  # ([optimizers], [schedulers])
    "lists_of_dicts",  # ([optimizers], [{"scheduler", "interval", "frequency", "monitor"}])
    "dict_optimizer",  # {"optimizer"}
    "dict",  # {"optimizer", "lr_scheduler": scheduler, "monitor"?}
    "dict_config",  # {"optimizer", "lr_scheduler": {"scheduler", "interval", ...}}
    "list_of_dicts",  # [{"optimizer", "lr_scheduler": {...}}] per optimizer
    "tuple_of_dicts",  # the same as a tuple
)
SCHEDULERS = ("step", "exponential", "plateau")
HPARAMS = ("none", "all", "ignore", "logger_false")


@dataclass
class Log:
    """One ``self.log`` call of a step method."""

    name: str
    value: str  # one of VALUES
    on_step: bool | None
    on_epoch: bool | None
    prog_bar: bool
    logger: bool
    reduce_fx: str


@dataclass
class Spec:
    """One drawn program."""

    seed: int
    batches: int
    val_batches: int
    trainer: dict[str, Any]
    logs: dict[str, list[Log]]
    checkpoint: dict[str, Any] | None
    early_stopping: dict[str, Any] | None
    lr_monitor: str | None  # LearningRateMonitor's logging_interval ('none': its default)
    callback_logs: bool
    stop_at: int | None  # a callback asks to stop after this batch of epoch 0
    validate_after: bool
    loggers: list[str] = field(default_factory=list)
    manual: bool = False  # automatic_optimization = False
    optimizers: int = 1
    form: str = "dict"  # what configure_optimizers returns: one of FORMS
    scheduler: str = "step"  # one of SCHEDULERS
    interval: str = "epoch"  # the scheduler dict's interval and frequency
    frequency: int = 1
    monitor: str | None = None  # the scheduler's monitor (a dict's, or the top dict's)
    manual_schedule: str = "none"  # manual optimization steps lr_schedulers() per batch/epoch
    val_loaders: int = 1
    epoch_end_logs: bool = False  # on_train_epoch_end / on_validation_epoch_end log a value
    hparams: str = "none"  # one of HPARAMS: how __init__ saves its hyperparameters
    cli: bool = False  # a LightningCLI run: fit -c <the spec as YAML>
    predict: bool = False  # trainer.predict after the fit

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> Spec:
        data = json.loads(text)
        data["logs"] = {stage: [Log(**log) for log in logs] for stage, logs in data["logs"].items()}
        return cls(**data)


def draw(rng: random.Random, seed: int) -> Spec:
    """One program from the grammar."""
    batches = rng.randint(2, 7)
    trainer: dict[str, Any] = {
        "max_epochs": rng.choice([1, 2, 3]),
        "log_every_n_steps": rng.choice([1, 2, 3, 50]),
        "accumulate_grad_batches": rng.choice([1, 1, 2, 3]),
        "num_sanity_val_steps": rng.choice([0, 2]),
    }
    if rng.random() < 0.3:
        trainer["max_steps"] = rng.randint(2, batches * 2)
    if rng.random() < 0.25:
        trainer["val_check_interval"] = rng.choice([0.5, 1, 2])
        if trainer["val_check_interval"] == 2 and rng.random() < 0.5:
            trainer["check_val_every_n_epoch"] = None  # counted across epochs
    if rng.random() < 0.2 and "check_val_every_n_epoch" not in trainer:
        trainer["check_val_every_n_epoch"] = 2
    if rng.random() < 0.2:
        trainer["gradient_clip_val"] = 0.5
    if rng.random() < 0.2:
        trainer["limit_train_batches"] = rng.choice([0.5, 2])
    if rng.random() < 0.15:
        trainer["limit_val_batches"] = rng.choice([0, 1])
    if rng.random() < 0.15:
        trainer["min_epochs"] = 2
    stages = ["training"]
    if rng.random() < 0.8:
        stages.append("validation")
    if rng.random() < 0.3:
        stages.append("test")
    logs = {stage: draw_logs(rng, stage) for stage in stages}
    val_loaders = rng.choice([1, 1, 2]) if "validation" in logs else 1
    epoch_end_logs = rng.random() < 0.3
    names = candidate_monitors(logs, val_loaders, epoch_end_logs)
    checkpoint = None
    if rng.random() < 0.6:
        monitor = rng.choice([None, *names, "never_logged"]) if names else None
        checkpoint = {
            "monitor": monitor,
            "mode": rng.choice(["min", "max"]),
            "save_top_k": rng.choice([1, 2, -1]) if monitor else rng.choice([1, -1]),
            "save_last": rng.choice([True, False]),
        }
        if monitor and monitor != "never_logged" and rng.random() < 0.5:
            checkpoint["filename"] = "{epoch}-{step}-{" + monitor + ":.3f}"
        if rng.random() < 0.2:
            checkpoint["every_n_train_steps"] = rng.choice([1, 2, 3])
    early_stopping = None
    if names and rng.random() < 0.3:
        early_stopping = {
            "monitor": rng.choice(names),
            "patience": rng.choice([0, 1]),
            "mode": rng.choice(["min", "max"]),
            "min_delta": rng.choice([0.0, 0.1]),
        }
    optimization = draw_optimization(rng, names)
    cli = rng.random() < 0.15
    return Spec(
        seed=seed,
        batches=batches,
        val_batches=rng.choice([0, 1, 1, 2, 2, 3, 3]),  # 0: empty evaluation loaders
        trainer=trainer,
        logs=logs,
        checkpoint=checkpoint,
        early_stopping=early_stopping,
        lr_monitor=rng.choice([None, None, "step", "epoch", "none"]),
        callback_logs=not cli and rng.random() < 0.3,
        stop_at=None if cli else rng.choice([None, None, None, rng.randint(0, batches - 1)]),
        validate_after=rng.random() < 0.4,
        loggers=rng.choice([["CSVLogger"], ["CSVLogger", "TensorBoardLogger"]]),
        val_loaders=val_loaders,
        epoch_end_logs=epoch_end_logs,
        hparams=rng.choice(HPARAMS),
        cli=cli,
        predict=rng.random() < 0.3,
        **optimization,
    )


def draw_optimization(rng: random.Random, names: list[str]) -> dict[str, Any]:
    """Automatic or manual optimization, the optimizers, and how configure_optimizers returns
    them with their schedulers."""
    manual = rng.random() < 0.25
    scheduler = rng.choice(SCHEDULERS)
    monitor = None
    if scheduler == "plateau" or rng.random() < 0.2:
        monitor = rng.choice([*names, "never_logged"]) if names and rng.random() < 0.9 else None
    return {
        "manual": manual,
        "optimizers": 2 if rng.random() < (0.4 if manual else 0.08) else 1,
        "form": rng.choice(FORMS),
        "scheduler": scheduler,
        "interval": rng.choice(["epoch", "step"]),
        "frequency": rng.choice([1, 1, 2]),
        "monitor": monitor,
        "manual_schedule": rng.choice(["none", "batch", "epoch"]) if manual else "none",
    }


def draw_logs(rng: random.Random, stage: str) -> list[Log]:
    logs = []
    for index in range(rng.randint(1, 3)):
        value = rng.choice(VALUES)
        metric = value.startswith("metric")
        on_step, on_epoch = rng.choice([None, True, False]), rng.choice([None, True, False])
        training = stage == "training"
        if not (training if on_step is None else on_step):  # Lightning refuses both False
            on_epoch = True if on_epoch is False or training else on_epoch
        logs.append(
            Log(
                name=f"{stage[:2]}{index}",
                value=value,
                on_step=on_step,
                on_epoch=on_epoch,
                prog_bar=rng.random() < 0.4,
                logger=rng.random() < 0.9,
                reduce_fx="mean" if metric else rng.choice(REDUCE_FX),
            )
        )
    return logs


def candidate_monitors(
    logs: dict[str, list[Log]], val_loaders: int = 1, epoch_end: bool = False
) -> list[str]:
    """Names a monitor may read: each logged name, and its ``_epoch`` form (with several
    validation loaders, a validation name carries its loader's ``/dataloader_idx_N``)."""
    names = []
    for stage, stage_logs in logs.items():
        suffix = "/dataloader_idx_0" if stage == "validation" and val_loaders > 1 else ""
        for log in stage_logs if stage != "test" else ():
            names += [log.name + suffix, f"{log.name}_epoch{suffix}"]
    if epoch_end:
        names += ["train_end", *(["val_end"] if "validation" in logs else [])]
    return names


# ---- comparing -----------------------------------------------------------------------------


def differences(ours: Any, theirs: Any, where: str = "") -> list[str]:
    """Where two runs' records differ (floats within TOLERANCE)."""
    if isinstance(ours, dict) and isinstance(theirs, dict):
        found = []
        for key in sorted(set(ours) | set(theirs), key=str):
            if key not in ours or key not in theirs:
                side = "trainkit" if key in ours else "Lightning"
                found.append(f"{where}.{key}: only under {side}")
            else:
                found += differences(ours[key], theirs[key], f"{where}.{key}")
        return found
    if isinstance(ours, float) and isinstance(theirs, float):
        both_nan = math.isnan(ours) and math.isnan(theirs)
        if both_nan or math.isclose(ours, theirs, rel_tol=TOLERANCE, abs_tol=TOLERANCE):
            return []
    elif ours == theirs:
        return []
    return [f"{where}: trainkit {ours!r}, Lightning {theirs!r}"]


# docs/compat.md "Different, on purpose" rows the tester accounts for: kept out of the grammar,
# or normalized before comparing (drawn_program.NOT_SUPPORTED, ``_instantiator``)
ON_PURPOSE = (
    "ModelCheckpoint(save_last=None): no last.ckpt",  # save_last always drawn
    # ... and trainkit's last.ckpt is written at every epoch end: newer than Lightning's
    "save_last=True: last.ckpt is written at every epoch end",  # normalized_checkpoints
    "ModelCheckpoint(every_n_epochs=N)",  # never drawn
    "default log folder lightning_logs",  # loggers always get their folders
    "self.log(on_step=False, on_epoch=False) raises",  # never drawn
    "an int val_check_interval larger than the epoch's batches raises",  # a lenient run
    "LightningCLI records _instantiator",  # removed from Lightning's hparams
    "enable_autolog_hparams, model_registry not supported",  # removed from the saved config
)


# what a run that raised is compared by: where it stopped, not what it logged on the way
AFTER_AN_ERROR = ("error", "epochs", "global_step", "checkpoints", "best")
# checkpoint keys only Lightning writes: its version
LIGHTNING_ONLY_KEYS = {"pytorch-lightning_version"}


def normalized_checkpoints(ours: dict[str, Any], theirs: dict[str, Any]) -> None:
    """A checkpoint's keys compare as the Lightning keys trainkit's file lacks (trainkit writes
    more: its loop position, RNG states, config)."""
    for name in set(ours) & set(theirs):
        missing = set(theirs[name]["keys"]) - set(ours[name]["keys"]) - LIGHTNING_ONLY_KEYS
        ours[name]["keys"], theirs[name]["keys"] = [], sorted(missing)
    # trainkit writes last.ckpt at every epoch end (docs/compat.md): where Lightning's holds an
    # earlier step, trainkit's is the newer state, not a difference
    last = "last.ckpt"
    if last in ours and last in theirs and ours[last]["global_step"] > theirs[last]["global_step"]:
        for key in ("epoch", "global_step"):
            ours[last][key] = theirs[last][key]


def compare(spec: Spec, root: Path) -> list[str]:
    """Run ``spec`` under both frameworks; the differences (empty: the same)."""
    theirs = run("lightning", spec, root / "lightning")
    ours = run("trainkit", spec, root / "trainkit")
    if theirs["error"] is not None and ours["error"] is None:
        # trainkit may run where Lightning refuses (docs/compat.md): said, not a difference
        return [f"{LENIENT} Lightning raised {theirs['error'][0]}, trainkit ran"]
    if ours["error"] is not None and theirs["error"] is not None:
        ours = {key: ours[key] for key in AFTER_AN_ERROR}
        theirs = {key: theirs[key] for key in AFTER_AN_ERROR}
        # trainkit's save_last writes last.ckpt at every epoch end (docs/compat.md), Lightning's
        # with a save and at the fit's end, which a failed fit does not reach
        for run_ in (ours, theirs):
            run_["checkpoints"] = sorted(
                name for name in run_["checkpoints"] if name != "last.ckpt"
            )
        # the same error: Lightning's class is one of trainkit's error's classes
        ours["error"] = theirs["error"] = theirs["error"][0] in ours["error"] or ours["error"]
        return differences(ours, theirs)
    normalized_checkpoints(ours["checkpoints"], theirs["checkpoints"])
    ours["warnings"], theirs["warnings"] = warning_categories(ours, theirs)
    # LightningCLI's own record of how it built the model (docs/compat.md: not provided)
    for hparams in [
        theirs["hparams"],
        *(c["hyper_parameters"] for c in theirs["checkpoints"].values()),
    ]:
        if isinstance(hparams, dict):
            hparams.pop("_instantiator", None)
    return differences(ours, theirs)


def warning_categories(ours: dict[str, Any], theirs: dict[str, Any]) -> tuple[dict, dict]:
    """Warnings compare by category, given once or several times; a category only trainkit
    gives is its own (better) message where Lightning is silent, not a difference. The texts
    differ by design, so each Lightning warning is printed beside the comparison's key."""

    def categories(found: dict[str, str]) -> dict[str, str]:
        kinds: dict[str, str] = {}
        for key, count in found.items():
            category = key.split(":")[0]
            kinds[category] = "several" if category in kinds else count
        return kinds

    own = {key: count for key, count in ours["warnings"].items() if not is_own_note(key)}
    mine, other = categories(own), categories(theirs["warnings"])
    return {k: v for k, v in mine.items() if k in other}, other


# trainkit's own notes where Lightning says nothing (docs/compat.md): not counted against a
# Lightning warning of the same category. self.log of a metric only updated in the step:
OWN_NOTES = (re.compile(r"self\.log\('[^']*', \w+\) on_step"),)


def is_own_note(key: str) -> bool:
    return any(note.search(key) for note in OWN_NOTES)


def cause(line: str) -> str:
    """What a difference line is about, without the program's own names: the record and the
    part of it (``fit.callback_metrics: value``, ``trainer.min_steps: value``)."""
    if line.startswith(LENIENT):
        return line
    where, _, what = line.partition(": ")
    where = re.sub(r"\.checkpoints\..*?\.ckpt", ".checkpoints.<file>", where)
    parts = where.strip(".").split(".")
    if parts[0] == "warnings":
        return f"warnings: {what} {'.'.join(parts[1:])}"
    kind = what if what.startswith("only under") else "value"
    depth = {"trainer": 2, "checkpoints": 3, "config": 3, "fit": 2, "end": 2}.get(parts[0], 1)
    return f"{'.'.join(parts[:depth])}: {kind}"


def specs(count: int, seed: int) -> list[Spec]:
    rng = random.Random(seed)
    return [draw(rng, seed * 1000 + index) for index in range(count)]
