"""What a checkpoint holds, and how a run state is put back into it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from trainkit.checkpoint.checkpoint_io import CheckpointIO, TorchCheckpointIO
from trainkit.checkpoint.files import (
    CHECKPOINT_FORMAT,
    CheckpointError,
    Progress,
    check_fits,
    checkpoint_candidates,
    load_checkpoint,
    plain_hparams,
    require_state_dict,
    sweep_dead_writers,
)
from trainkit.checkpoint.world_change import WorldChange, world_change
from trainkit.distributed.slurm import requeue_min_steps
from trainkit.metrics import MetricStore
from trainkit.module import TrainModule
from trainkit.seed import collect_rng_states, restore_rng_states
from trainkit.state import ResumePoint, RunState

if TYPE_CHECKING:
    from trainkit.checkpoint.resume_changes import RunSettings


def dump(state: RunState, weights_only: bool = False) -> dict[str, Any]:
    """Everything needed to continue exactly: weights, optimizers, loop position, every RNG;
    ``weights_only``: as Lightning, no optimizer, scheduler, scaler, RNG or callback state."""
    module = state.require_module()
    strategy = state.strategy
    position = state.position
    loops = position.state_dict()
    checkpoint: dict[str, Any] = {
        "format": CHECKPOINT_FORMAT,
        "epoch": position.current_epoch,  # Lightning's count; "loops" has the epoch to resume
        "global_step": loops.pop("global_step"),  # top level, where Lightning keeps it
        "loops": loops,
        "state_dict": strategy.module_state_dict(module),
        "optimizer_states": [strategy.optimizer_state_dict(o) for o in state.optimizers],
        "lr_schedulers": [config.scheduler.state_dict() for config in state.lr_scheduler_configs],
        "precision_scaler": state.precision.state_dict(),
        "rng_states": strategy.all_gather_object(collect_rng_states()),
        "epoch_start_rng_states": strategy.all_gather_object(state.epoch_start_rng),
        # only the callbacks with a state, as Lightning (so load_state_dict meets a saved one)
        "callbacks": {
            cb.state_key: kept for cb in state.given.callbacks if (kept := cb.state_dict())
        },
        "hyper_parameters": plain_hparams(module.hparams),
        "world_size": strategy.world_size,
        "train_batch_size": getattr(state.given.train_loader, "batch_size", None),  # per rank
        "precision": strategy.precision,
        "config": state.cli_config,
        "optimizer_classes": optimizer_classes(state),
        # requeued attempts in a row that stopped before a step (a requeue bound reads it)
        "stalled_attempts": state.stop.stalled_now(position.global_step, requeue_min_steps()),
    }
    if module.hparams:  # as Lightning's: the name its hyperparameters are saved under
        checkpoint["hparams_name"] = "kwargs"
    train_store = state.metrics.train_store
    if position.fitting and position.phase == "batches" and train_store is not None:
        # the epoch's metrics so far, so the resumed epoch logs the same means
        checkpoint["epoch_metrics_so_far"] = strategy.all_gather_object(
            train_store.partial_epoch_state()
        )
    datamodule = state.given.datamodule
    if datamodule is not None:
        key = datamodule.CHECKPOINT_HYPER_PARAMS_KEY  # 'datamodule_hyper_parameters'
        checkpoint[key] = plain_hparams(datamodule.hparams)
        datamodule_state = datamodule.state_dict()
        if datamodule_state:
            checkpoint["datamodule_state"] = datamodule_state
    if weights_only:
        for key in RESUME_ONLY:
            checkpoint.pop(key, None)
    else:
        state.hooks.call_callbacks("on_save_checkpoint", checkpoint)
    module.on_save_checkpoint(checkpoint)
    return checkpoint


RESUME_ONLY = (  # what a weights-only checkpoint leaves out
    "optimizer_states",
    "lr_schedulers",
    "precision_scaler",
    "rng_states",
    "epoch_start_rng_states",
    "callbacks",
    "epoch_metrics_so_far",
)


def checkpoint_io(state: RunState) -> CheckpointIO:
    """The CheckpointIO of the run (an atomic torch.save on this thread unless one was given)."""
    return state.checkpoint_io if state.checkpoint_io is not None else TorchCheckpointIO()


def save(
    state: RunState, path: str, weights_only: bool = False, storage_options: object = None
) -> None:
    """Write a full (or weights-only) checkpoint of ``state`` through its CheckpointIO, with
    ``storage_options`` for it (every rank calls this).
    During the fit loop an asynchronous write may still be in flight when this returns (the end
    of fit waits for it); anywhere else the file is complete."""
    io = checkpoint_io(state)
    state.strategy.save_checkpoint_file(dump(state, weights_only), path, io, storage_options)
    if state.preemption is None:  # no fit loop will wait for it
        io.wait()


def finish_saves(state: RunState, error: BaseException | None = None) -> None:
    """Wait for the save in flight and let the CheckpointIO free what it holds; a failed write
    raises, unless ``error`` already fails the run (the write's failure is then noted on it)."""
    io = state.checkpoint_io
    if io is None:
        return
    try:
        io.teardown()
    except Exception as write_error:
        if error is None:
            raise
        error.add_note(f"also: {write_error}")


def restore(state: RunState, path: str, full: bool, weights_only: bool = True) -> dict[str, Any]:
    """Load weights (and, with ``full``, optimizers, schedulers, loops, callbacks, RNG)."""
    optimizers = state.optimizers if full else []
    checkpoint = state.strategy.load_checkpoint_file(
        path, checkpoint_io(state), weights_only, optimizers
    )
    require_state_dict(checkpoint, path)
    module = state.require_module()
    module.on_load_checkpoint(checkpoint)
    try:
        state.strategy.load_module_state_dict(module, checkpoint["state_dict"])
    except RuntimeError as err:  # torch's many-line report, made one line
        from trainkit.checkpoint.resume_changes import model_changes

        changed = model_changes(checkpoint, current_settings(state))
        try:
            check_fits(module, checkpoint["state_dict"], str(path))
        except CheckpointError as unfit:
            raise CheckpointError(f"{unfit}{changed}") from None
        raise CheckpointError(f"checkpoint {str(path)!r} does not fit: {err}{changed}") from err
    state.hooks.call_callbacks("on_load_checkpoint", checkpoint)
    if not full:  # evaluated weights are logged at the step they were trained to
        position = state.position
        position.global_step = checkpoint.get("global_step", 0)
        position.batches_stepped = checkpoint.get("loops", {}).get(
            "batches_stepped", position.global_step
        )
        return checkpoint
    require_resume_state(checkpoint, str(path))
    check_changes(checkpoint, state, str(path))
    if state.strategy.is_global_zero and Path(path).is_file():  # what a killed writer left there
        sweep_dead_writers(Path(path).parent)
    states = checkpoint["optimizer_states"]
    if len(states) != len(state.optimizers):
        raise CheckpointError(
            f"checkpoint {path!r} has {len(states)} optimizer states but configure_optimizers "
            f"built {len(state.optimizers)}"
        )
    for optimizer, optimizer_state in zip(state.optimizers, states):
        state.strategy.load_optimizer_state_dict(optimizer, optimizer_state)
    for config, scheduler_state in zip(state.lr_scheduler_configs, checkpoint["lr_schedulers"]):
        config.scheduler.load_state_dict(scheduler_state)
    state.precision.load_state_dict(checkpoint["precision_scaler"])
    for callback in state.given.callbacks:
        if callback.state_key in checkpoint["callbacks"]:
            callback.load_state_dict(checkpoint["callbacks"][callback.state_key])
    if state.given.datamodule is not None and "datamodule_state" in checkpoint:
        state.given.datamodule.load_state_dict(checkpoint["datamodule_state"])
    skip = state.position.load_state_dict(
        {"global_step": checkpoint["global_step"], **checkpoint["loops"]}
    )
    change = changed_world(checkpoint, skip, state)
    if change is not None and state.strategy.is_global_zero:
        print(change.describe(state.position.epoch), flush=True)
    state.stop.resumed_step = checkpoint["global_step"]
    state.stop.stalled_attempts = checkpoint.get("stalled_attempts", 0)
    state.stop.resume = ResumePoint(
        rng=checkpoint["rng_states"],
        epoch_rng=checkpoint["epoch_start_rng_states"],
        # the saved ranks' partial epoch means belong to their shards: on another world size
        # the resumed epoch's means cover the batches after the resume
        epoch_metrics=checkpoint.get("epoch_metrics_so_far") if skip and not change else None,
        skip=change.skip if change is not None else skip,
    )
    return checkpoint


def check_changes(checkpoint: dict[str, Any], state: RunState, path: str) -> None:
    """Show the settings that changed since the checkpoint (rank 0) and refuse, on every rank,
    a change that cannot resume correctly unless the user accepted it (after a CLI's pre-flight
    check only the optimizers, which the ranks build, are left to compare)."""
    from trainkit.checkpoint import resume_changes

    now = current_settings(state)
    resume_changes.check(
        checkpoint,
        now,
        path,
        show=state.strategy.is_global_zero,
        only_built=resume_changes.checked(),
    )


def current_settings(state: RunState) -> RunSettings:
    """The run's settings now, described as a checkpoint describes its run's."""
    from trainkit.checkpoint.resume_changes import run_settings

    return run_settings(
        state.cli_config,
        state.require_module(),
        state.given.datamodule,
        state.strategy.precision,
        state.strategy.world_size,
        optimizer_classes(state),
    )


def optimizer_classes(state: RunState) -> list[str]:
    """The classes of the optimizers the run configured (a strategy's wrapper is not a change
    of optimizer: a ddp checkpoint resumes under horovod, whose optimizer subclasses it)."""
    configured = state.optimizer_types or [type(o) for o in state.optimizers]
    return [qualified_name(kind) for kind in configured]


def qualified_name(cls: type) -> str:
    """``module.Class`` of a class, as a config's class_path names it."""
    return f"{cls.__module__}.{cls.__qualname__}"


def changed_world(checkpoint: dict[str, Any], skip: int, state: RunState) -> WorldChange | None:
    """Where the interrupted epoch goes on when the checkpoint was saved by another number of
    ranks (None: the same number, or a checkpoint that does not say)."""
    saved = checkpoint.get("world_size")
    world_size = state.strategy.world_size
    if saved is None or saved == world_size:
        return None
    batch_size = getattr(state.given.train_loader, "batch_size", None)
    return world_change(saved, checkpoint.get("train_batch_size"), skip, world_size, batch_size)


RESUME_KEYS = ("optimizer_states", "lr_schedulers", "loops", "global_step", "rng_states")


def require_resume_state(checkpoint: dict[str, Any], path: str) -> None:
    """Fit resumes only from a checkpoint that holds the loop and optimizer state."""
    missing = [key for key in RESUME_KEYS if key not in checkpoint]
    if missing:
        raise CheckpointError(
            f"checkpoint {path!r} holds no {', '.join(missing)}; expected a checkpoint saved "
            "during fit to resume from; for its weights alone use validate/test/predict"
        )


def verify(path: str, module: TrainModule, weights_only: bool, full: bool) -> dict[str, Any]:
    """Before any rank starts: the checkpoint reads (tensors memory-mapped, not loaded), holds
    what ``full`` resuming needs, and fits ``module`` (unless its layers are built in setup);
    returns it."""
    checkpoint = load_checkpoint(path, weights_only=weights_only, mmap=True)
    require_state_dict(checkpoint, path)
    if full:
        require_resume_state(checkpoint, path)
    builds_in_setup = any(
        getattr(type(module), name, None) is not getattr(TrainModule, name, None)
        for name in ("setup", "configure_model")
    )
    if not builds_in_setup:
        check_fits(module, checkpoint["state_dict"], path)
    return checkpoint


def _for_rank(states: list[Any], rank: int) -> Any:
    return states[rank] if rank < len(states) else states[0]


def restore_rng(state: RunState, after_skip: bool = False) -> None:
    """Before the first resumed epoch (or after skipping its done batches), restore the RNGs."""
    resume = state.stop.resume
    if resume is None:
        return
    rank = state.strategy.global_rank
    if resume.skip and not after_skip:
        states = _for_rank(resume.epoch_rng, rank)  # reshuffle as that epoch did
    else:
        states = _for_rank(resume.rng, rank)
        state.stop.resume = None
    if states is not None:
        restore_rng_states(states)


def restore_epoch_metrics(state: RunState, store: MetricStore) -> None:
    """Give the resumed epoch's metric store what this rank had logged before the checkpoint."""
    resume = state.stop.resume
    if resume is not None and resume.epoch_metrics:
        store.load_partial_epoch_state(_for_rank(resume.epoch_metrics, state.strategy.global_rank))


def batches_to_skip(state: RunState) -> int:
    """Batches of the current epoch a mid-epoch checkpoint had already trained on."""
    resume = state.stop.resume
    return resume.skip if resume is not None else 0


class RecordedPaths(Protocol):
    """Where a checkpoint callback (ModelCheckpoint) recorded its last and best checkpoints."""

    @property
    def last_model_path(self) -> str: ...
    @property
    def best_model_path(self) -> str: ...


def resolve_path(
    ckpt_path: str,
    checkpoint_callback: RecordedPaths | None,
    root: str,
    weights_only: bool = True,
    quiet: bool = False,
) -> str | None:
    """'last', 'best' (recorded by ModelCheckpoint) or a path, as a path. 'last' is the
    last.ckpt this Trainer wrote, else the one under ``root`` that recorded the most steps
    (said, unless ``quiet``, when several compete); with none there yet, None: the stage
    starts from the model as built, as in Lightning (said once, unless ``quiet``), so a job
    submitted again with ``--ckpt_path last`` resumes once a checkpoint exists."""
    callback = checkpoint_callback
    if ckpt_path == "last":
        if (
            callback is not None
            and callback.last_model_path
            and Path(callback.last_model_path).is_file()
        ):
            return callback.last_model_path
        candidates = checkpoint_candidates(root)
        if not quiet:
            say_which_last(candidates, root)
        return str(candidates[0][1]) if candidates else None
    if ckpt_path == "best":
        if callback is not None and callback.best_model_path:
            return callback.best_model_path
        last_path = resolve_path("last", callback, root, weights_only, quiet=True)
        if last_path is None:
            raise FileNotFoundError(
                f"ckpt_path 'best': no checkpoint under {root!r}; expected a finished fit "
                "there; run fit first or pass a path"
            )
        last = load_checkpoint(last_path, weights_only=weights_only)
        for callback_state in last.get("callbacks", {}).values():
            if callback_state.get("best_model_path"):
                return callback_state["best_model_path"]
        raise FileNotFoundError(
            "ckpt_path 'best': no best checkpoint recorded; use 'last' or a path"
        )
    return ckpt_path


def say_which_last(candidates: list[tuple[Progress, Path]], root: str) -> None:
    """On global rank 0: that 'last' found nothing (the stage starts from the model as built),
    or which of several last.ckpt it chose, by how far they trained."""
    from trainkit.distributed.comm import rank_zero_info

    if not candidates:
        rank_zero_info(
            f"trainkit: ckpt_path 'last': no last.ckpt under {root!r} yet; starting from the "
            "model as built (it resumes once a checkpoint is there)",
            file=sys.stderr,
        )
    elif len(candidates) > 1:
        (furthest, chosen), others = candidates[0], candidates[1:]
        rest = ", ".join(f"{path} ({progress})" for progress, path in others[:3])
        more = f" and {len(others) - 3} more" if len(others) > 3 else ""
        rank_zero_info(
            f"trainkit: ckpt_path 'last': {len(candidates)} last.ckpt under {root!r}; "
            f"resuming the one trained furthest, {chosen} ({furthest}); not {rest}{more}",
            file=sys.stderr,
        )


def last_checkpoint_path(checkpoint_callback: object, log_dir: str) -> str:
    """``last.ckpt`` where ModelCheckpoint keeps it (or the run's checkpoints folder)."""
    folder = getattr(checkpoint_callback, "dirpath", None) or Path(log_dir) / "checkpoints"
    return str(Path(folder) / "last.ckpt")
