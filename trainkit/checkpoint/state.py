"""What a checkpoint holds and how a Trainer is put back into that state."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainkit.checkpoint.io import (
    CHECKPOINT_FORMAT,
    CheckpointError,
    check_fits,
    find_checkpoint,
    load_checkpoint,
    plain_hparams,
    require_state_dict,
)
from trainkit.module import TrainModule
from trainkit.seed import collect_rng_states, restore_rng_states

if TYPE_CHECKING:
    from trainkit.trainer.trainer import Trainer


def dump(trainer: Trainer) -> dict[str, Any]:
    """Everything needed to continue exactly: weights, optimizers, loop position, every RNG."""
    module = trainer.lightning_module
    strategy = trainer.strategy
    in_fit = trainer.state == "fit"
    phase = trainer._epoch_phase if in_fit else None  # None: between epochs
    batches = trainer._batches_done if phase else 0
    # an epoch is complete once its end ran over every batch (not one cut short by max_steps)
    completed = not in_fit or (phase == "end" and batches >= trainer.num_training_batches)
    checkpoint: dict[str, Any] = {
        "format": CHECKPOINT_FORMAT,
        "epoch": trainer.current_epoch,
        "global_step": trainer.global_step,
        "loops": {
            "epoch": trainer.current_epoch,
            "batches_in_epoch": batches,
            "epoch_completed": completed,
        },
        "state_dict": strategy.module_state_dict(module),
        "optimizer_states": [strategy.optimizer_state_dict(o) for o in trainer.optimizers],
        "lr_schedulers": [config.scheduler.state_dict() for config in trainer.lr_scheduler_configs],
        "precision_scaler": trainer.precision_plugin.state_dict(),
        "rng_states": strategy.all_gather_object(collect_rng_states()),
        "epoch_start_rng_states": strategy.all_gather_object(trainer._epoch_start_rng),
        "callbacks": {cb.state_key: cb.state_dict() for cb in trainer.callbacks},
        "hyper_parameters": plain_hparams(module.hparams),
        "world_size": strategy.world_size,
        "precision": trainer.precision,
        "config": trainer.cli_config,
    }
    if phase == "batches" and trainer._train_store is not None:  # the epoch's metrics so far
        checkpoint["epoch_metrics_so_far"] = strategy.all_gather_object(
            trainer._train_store.partial_epoch_state()
        )
    if trainer.datamodule is not None:
        checkpoint["datamodule_hyper_parameters"] = plain_hparams(trainer.datamodule.hparams)
        checkpoint["datamodule_state"] = trainer.datamodule.state_dict()
    for callback in trainer.callbacks:
        callback.on_save_checkpoint(trainer, module, checkpoint)
    module.on_save_checkpoint(checkpoint)
    return checkpoint


def restore(trainer: Trainer, path: str, full: bool) -> dict[str, Any]:
    """Load weights (and, with ``full``, optimizers, schedulers, loops, callbacks, RNG)."""
    checkpoint = load_checkpoint(
        path, map_location="cpu", weights_only=trainer.checkpoint_weights_only
    )
    require_state_dict(checkpoint, path)
    module = trainer.lightning_module
    module.on_load_checkpoint(checkpoint)
    try:
        trainer.strategy.load_module_state_dict(module, checkpoint["state_dict"])
    except RuntimeError as err:  # torch's many-line report, made one line
        check_fits(module, checkpoint["state_dict"], str(path))
        raise CheckpointError(f"checkpoint {str(path)!r} does not fit: {err}") from err
    for callback in trainer.callbacks:
        callback.on_load_checkpoint(trainer, module, checkpoint)
    if not full:
        return checkpoint
    require_resume_state(checkpoint, str(path))
    states = checkpoint["optimizer_states"]
    if len(states) != len(trainer.optimizers):
        raise CheckpointError(
            f"checkpoint {path!r} has {len(states)} optimizer states but configure_optimizers "
            f"built {len(trainer.optimizers)}"
        )
    for optimizer, state in zip(trainer.optimizers, states):
        trainer.strategy.load_optimizer_state_dict(optimizer, state)
    for config, state in zip(trainer.lr_scheduler_configs, checkpoint["lr_schedulers"]):
        config.scheduler.load_state_dict(state)
    trainer.precision_plugin.load_state_dict(checkpoint["precision_scaler"])
    for callback in trainer.callbacks:
        if callback.state_key in checkpoint["callbacks"]:
            callback.load_state_dict(checkpoint["callbacks"][callback.state_key])
    if trainer.datamodule is not None and "datamodule_state" in checkpoint:
        trainer.datamodule.load_state_dict(checkpoint["datamodule_state"])
    loops = checkpoint["loops"]
    trainer.global_step = checkpoint["global_step"]
    trainer.current_epoch = loops["epoch"] + (1 if loops["epoch_completed"] else 0)
    skip = 0 if loops["epoch_completed"] else loops["batches_in_epoch"]
    trainer._resume = {
        "rng": checkpoint["rng_states"],
        "epoch_rng": checkpoint["epoch_start_rng_states"],
        "epoch_metrics": checkpoint.get("epoch_metrics_so_far") if skip else None,
        "skip": skip,
    }
    return checkpoint


RESUME_KEYS = ("optimizer_states", "lr_schedulers", "loops", "global_step", "rng_states")


def require_resume_state(checkpoint: dict[str, Any], path: str) -> None:
    """Fit resumes only from a checkpoint that holds the loop and optimizer state."""
    missing = [key for key in RESUME_KEYS if key not in checkpoint]
    if missing:
        raise CheckpointError(
            f"checkpoint {path!r} holds no {', '.join(missing)}; expected a checkpoint saved "
            "during fit to resume from; for its weights alone use validate/test/predict"
        )


def verify(path: str, module: Any, weights_only: bool, full: bool) -> None:
    """Before any rank starts: the checkpoint reads (tensors memory-mapped, not loaded), holds
    what ``full`` resuming needs, and fits ``module`` (unless its layers are built in setup)."""
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


def _for_rank(states: list[Any], rank: int) -> Any:
    return states[rank] if rank < len(states) else states[0]


def restore_rng(trainer: Trainer, after_skip: bool = False) -> None:
    """Before the first resumed epoch (or after skipping its done batches), restore the RNGs."""
    resume = trainer._resume
    if resume is None:
        return
    if resume["skip"] and not after_skip:
        states = _for_rank(resume["epoch_rng"], trainer.global_rank)  # reshuffle as that epoch did
    else:
        states = _for_rank(resume["rng"], trainer.global_rank)
        trainer._resume = None
    if states is not None:
        restore_rng_states(states)


def restore_epoch_metrics(trainer: Trainer, store: Any) -> None:
    """Give the resumed epoch's metric store what this rank had logged before the checkpoint."""
    resume = trainer._resume
    if resume is not None and resume.get("epoch_metrics"):
        store.load_partial_epoch_state(_for_rank(resume["epoch_metrics"], trainer.global_rank))


def batches_to_skip(trainer: Trainer) -> int:
    """Batches of the current epoch a mid-epoch checkpoint had already trained on."""
    resume = trainer._resume
    return resume["skip"] if resume is not None else 0


def resolve_path(trainer: Trainer, ckpt_path: str) -> str:
    """'last' (newest last.ckpt), 'best' (recorded by ModelCheckpoint) or a path, as a path."""
    callback = trainer.checkpoint_callback
    if ckpt_path == "last":
        if (
            callback is not None
            and callback.last_model_path
            and Path(callback.last_model_path).is_file()
        ):
            return callback.last_model_path
        found = find_checkpoint(trainer.default_root_dir)
        if found is None:
            raise FileNotFoundError(
                f"ckpt_path 'last': no last.ckpt under {trainer.default_root_dir!r}; train first"
            )
        return str(found)
    if ckpt_path == "best":
        if callback is not None and callback.best_model_path:
            return callback.best_model_path
        last = load_checkpoint(
            resolve_path(trainer, "last"), weights_only=trainer.checkpoint_weights_only
        )
        for state in last.get("callbacks", {}).values():
            if state.get("best_model_path"):
                return state["best_model_path"]
        raise FileNotFoundError(
            "ckpt_path 'best': no best checkpoint recorded; use 'last' or a path"
        )
    return ckpt_path
