"""ModelCheckpoint's helpers: its triggers, file names (templates, versions) and file operations."""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from trainkit.errors import ConfigError, MisconfigurationError
from trainkit.loggers.base import SavedCheckpoints
from trainkit.metrics import closest_key_hint

if TYPE_CHECKING:
    from trainkit.trainer.trainer import Trainer

_FIELD = re.compile(r"\{([A-Za-z_][\w/.-]*)(:[^}]*)?\}")


def fill_template(template: str, metrics: dict[str, Any], insert_name: bool) -> str:
    """``{epoch}-{val_loss:.2f}`` -> ``epoch=3-val_loss=0.12`` (``3-0.12`` without names);
    a name that was not logged reads as 0, as in Lightning."""

    def fill(match: re.Match) -> str:
        name, spec = match.group(1), match.group(2) or ""
        value = metrics.get(name, 0)
        if isinstance(value, torch.Tensor):
            value = value.item()
        text = format(value, spec[1:]) if spec else str(value)
        return f"{name}={text}" if insert_name else text

    return _FIELD.sub(fill, template)


def monitor_candidates(trainer: Trainer) -> dict[str, Any]:
    """What a filename and ``monitor`` can use: the callback metrics plus ``epoch`` and ``step``."""
    candidates = dict(trainer.callback_metrics)
    candidates.setdefault("epoch", trainer.current_epoch)
    candidates.setdefault("step", trainer.global_step)
    for key in ("epoch", "step"):
        value = candidates[key]
        if isinstance(value, torch.Tensor):
            candidates[key] = int(value.item())
    return candidates


def exists_on_rank_zero(trainer: Trainer, path: str) -> bool:
    """Whether ``path`` exists, as global rank 0 sees it (every rank gets the same answer)."""
    return bool(trainer.strategy.broadcast(os.path.lexists(path)))


def remove_checkpoint(trainer: Trainer, path: str) -> None:
    """Delete a checkpoint file (or sharded checkpoint folder) on global rank 0, once the save
    in flight is on disk: with AsyncCheckpointIO the file replacing it may still be being
    written, and a kill between the two would leave neither."""
    if not trainer.is_global_zero:
        return
    wait_for_saves(trainer)
    target = Path(path)
    if target.is_dir() and not target.is_symlink():
        shutil.rmtree(target)
    else:
        target.unlink(missing_ok=True)


def link_checkpoint(trainer: Trainer, target: str, link: str) -> None:
    """Make ``link`` a relative symlink to ``target`` (a copy where links are not allowed)."""
    if trainer.is_global_zero and os.path.abspath(target) != os.path.abspath(link):
        path = Path(link)
        if path.is_symlink() or path.is_file():
            path.unlink()
        elif path.is_dir():
            shutil.rmtree(path)
        try:
            os.symlink(os.path.relpath(target, os.path.dirname(link)), link)
        except OSError:
            wait_for_saves(trainer)  # a copy needs the whole file, also when written async
            shutil.copy(target, link)
    trainer.strategy.barrier()


def inside(folder: str, path: str) -> bool:
    """Whether ``path`` lies inside ``folder`` (only such files are ever deleted)."""
    return Path(folder).absolute() in Path(path).absolute().parents


def notify_loggers(trainer: Trainer, callback: SavedCheckpoints) -> None:
    """Lightning's ``logger.after_save_checkpoint(callback)``, on global rank 0, for loggers
    that define it (e.g. to upload the new checkpoint)."""
    if not trainer.is_global_zero:
        return
    from trainkit.loggers.base import Logger

    hooks = [
        logger.after_save_checkpoint
        for logger in trainer.loggers
        if callable(getattr(logger, "after_save_checkpoint", None))
    ]
    if any(getattr(hook, "__func__", None) is not Logger.after_save_checkpoint for hook in hooks):
        wait_for_saves(trainer)  # a logger that uploads the file needs all of it on disk
    for hook in hooks:
        hook(callback)


def wait_for_saves(trainer: Trainer) -> None:
    """Block until the run's CheckpointIO has written every save (async saves finish)."""
    io = trainer.run_state.checkpoint_io
    if io is not None:
        io.wait()


def tensor_or_none(value: object) -> torch.Tensor | None:
    """A saved score as a tensor (None stays None)."""
    return None if value is None else torch.as_tensor(value)


def check_choices(mode: str, save_last: object, save_top_k: int, monitor: str | None) -> None:
    """ModelCheckpoint's mode, save_last and save_top_k (with or without a monitor)."""
    if mode not in ("min", "max"):
        raise ConfigError("ModelCheckpoint mode", mode, "'min' or 'max'")
    if save_last not in (True, False, None, "link"):
        raise ConfigError("ModelCheckpoint save_last", save_last, "true, false, null or 'link'")
    if save_top_k < -1:
        raise ConfigError("ModelCheckpoint save_top_k", save_top_k, "-1 (all), 0 or a positive int")
    if monitor is None and save_top_k not in (-1, 0, 1):
        raise ConfigError(
            "ModelCheckpoint save_top_k",
            save_top_k,
            "-1, 0 or 1 without a monitor",
            "set monitor to the logged metric that ranks the checkpoints",
        )


def triggers(
    every_n_train_steps: int | None, every_n_epochs: int | None, interval: timedelta | None
) -> tuple[int, int]:
    """Lightning's triggers: none given means every epoch; at most one may be set."""
    if every_n_train_steps is None and every_n_epochs is None and interval is None:
        return 0, 1
    steps, epochs = every_n_train_steps or 0, every_n_epochs or 0
    if steps < 0:
        raise ConfigError("ModelCheckpoint every_n_train_steps", steps, "an int >= 0")
    if epochs < 0:
        raise ConfigError("ModelCheckpoint every_n_epochs", epochs, "an int >= 0")
    if (steps >= 1) + (epochs >= 1) + (interval is not None) > 1:
        raise ConfigError(
            "ModelCheckpoint triggers",
            f"every_n_train_steps={steps}, every_n_epochs={epochs}, train_time_interval={interval}",
            "one of them at most",
            "keep one trigger, or use two ModelCheckpoint callbacks",
        )
    return steps, epochs


def carried_best(
    state: dict[str, Any], kept: dict[str, torch.Tensor], monitor: str | None, dirpath: str | None
) -> tuple[str, torch.Tensor] | None:
    """The best checkpoint a resumed callback state names outside the top-k files this run
    keeps (the earlier run wrote into another folder): it stays the best until a better one,
    and is never removed from here. Said once, on rank 0."""
    from trainkit.distributed.comm import rank_zero_info

    path, score = state.get("best_model_path", ""), tensor_or_none(state.get("best_model_score"))
    if not path or score is None or path in kept:
        return None
    rank_zero_info(
        f"trainkit: ModelCheckpoint: the resumed run's best {path} ({monitor}="
        f"{float(score):.5g}) stays the best until a better one; new checkpoints go to {dirpath}"
    )
    return path, score


def best_of(
    mode: str, earlier: tuple[str, torch.Tensor] | None, path: str, score: torch.Tensor
) -> tuple[str, torch.Tensor]:
    """The better of this run's best and an earlier run's carried best (``mode``: min or max)."""
    if earlier is None:
        return path, score
    better = earlier[1] < score if mode == "min" else earlier[1] > score
    return earlier if bool(better) else (path, score)


def free_name(
    trainer: Trainer,
    name: Callable[..., str],
    metrics: dict[str, Any],
    replaced: str | None,
    first_version: int | None,
) -> str:
    """``name(metrics)``, or with ``ver=first_version, ...`` while a file of that name exists on
    rank 0 (``replaced``, the file this one replaces, counts as free); None: never versioned."""
    filepath = name(metrics)
    version = first_version
    while version is not None and filepath != replaced and exists_on_rank_zero(trainer, filepath):
        filepath = name(metrics, ver=version)
        version += 1
    return filepath


def weights_are_finite(trainer: Trainer, module: torch.nn.Module, say: bool) -> bool:
    """Whether every rank's part of the weights is free of NaN and infinity (every rank asks);
    ``say``: tell the user (rank 0) when they are not, since no checkpoint is written then."""
    from trainkit.strategies.shards import local_part

    finite = all(bool(torch.isfinite(local_part(p)).all()) for p in module.parameters())
    if trainer.world_size > 1:
        finite = all(trainer.strategy.all_gather_object(finite))
    if not finite and say and trainer.is_global_zero:
        print(
            f"ModelCheckpoint: the weights hold NaN or infinity at epoch {trainer.current_epoch}, "
            f"step {trainer.global_step}: no checkpoint is written from now on; the ones already "
            "saved are kept (said once)",
            flush=True,
        )
    return finite


def monitor_not_logged(monitor: str, metrics: dict[str, Any]) -> MisconfigurationError:
    """ModelCheckpoint's monitored key is not among the logged metrics (Lightning's message, and
    the closest logged key)."""
    return MisconfigurationError(
        f"`ModelCheckpoint(monitor={monitor!r})` could not find the monitored key in the "
        f"returned metrics: {list(metrics)}. HINT: Did you call `log({monitor!r}, value)` in the "
        f"`LightningModule`?{closest_key_hint(monitor, metrics)}"
    )


def validation_follows(trainer: Trainer, batch_idx: int) -> bool:
    """Lightning's guess at the epoch's last training batch that a validation runs after it
    (any validation this epoch counts), so a step save waits for that validation's metrics."""
    every = trainer.check_val_every_n_epoch
    return (
        batch_idx + 1 == trainer.num_training_batches
        and trainer.enable_validation
        and sum(trainer.num_val_batches) > 0
        and (every is None or (trainer.current_epoch + 1) % every == 0)
    )


def say_post_step_weights(trainer: Trainer, every: int) -> None:
    """Under manual optimization a save on ``every_n_train_steps`` holds the weights after the
    step's ``optimizer.step()`` (Lightning warns at each such save; Python shows it once)."""
    if trainer.is_global_zero:
        import warnings

        warnings.warn(
            f"ModelCheckpoint(every_n_train_steps={every}) under manual optimization saves the "
            "weights as they are after the step's optimizer.step(); to keep the weights from "
            "before it, save them yourself in training_step",
            UserWarning,
            stacklevel=2,
        )
