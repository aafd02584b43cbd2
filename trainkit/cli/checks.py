"""Checks a CLI makes before it runs a stage: the checkpoint asked for exists and fits."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from trainkit.checkpoint.resume_changes import RunSettings
    from trainkit.datamodule import DataModule
    from trainkit.module import TrainModule
    from trainkit.trainer.trainer import Trainer


def check_checkpoint(
    trainer: Trainer,
    model: TrainModule,
    subcommand: str,
    ckpt_path: str | None,
    datamodule: DataModule | None = None,
) -> None:
    """Before any rank starts: the checkpoint exists and fits the model (checked once, by the
    process the user started; a rank trainkit launched skips it)."""
    import os

    from trainkit.distributed.signals import ERROR_FILE_ENV

    check_optimizer(model, subcommand)
    if subcommand == "fit":
        check_effective_batch(trainer, datamodule)
    check_ckpt_path(ckpt_path, trainer.default_root_dir)
    if ckpt_path is None or not trainer.is_global_zero or os.environ.get(ERROR_FILE_ENV):
        return
    from trainkit.checkpoint.files import CheckpointError
    from trainkit.checkpoint.resume_changes import model_changes
    from trainkit.checkpoint.state import resolve_path, verify

    weights_only = trainer.checkpoint_weights_only
    path = resolve_path(
        ckpt_path, trainer.checkpoint_callback, trainer.default_root_dir, weights_only, quiet=True
    )
    if path is None:  # 'last' with none there yet: the stage says so and starts fresh
        return
    try:
        checkpoint = verify(path, model, weights_only, full=subcommand == "fit")
    except CheckpointError as err:  # name the model arguments that changed, if any did
        from trainkit.checkpoint.files import load_checkpoint

        saved = load_checkpoint(path, weights_only=weights_only, mmap=True)
        raise CheckpointError(
            f"{err}{model_changes(saved, settings_now(trainer, model))}"
        ) from None
    if subcommand == "fit":
        compare_settings(checkpoint, trainer, model, path)


def check_effective_batch(trainer: Trainer, datamodule: DataModule | None) -> None:
    """``batch_size_mode: effective`` with the data section's ``batch_size`` that the ranks
    cannot share evenly: refused once, here, before any rank starts (each rank would refuse it
    again on its own)."""
    from trainkit.scaling import per_device_batch

    if trainer.batch_size_mode != "effective" or datamodule is None:
        return
    hparams = getattr(datamodule, "hparams", None)
    batch = hparams.get("batch_size") if isinstance(hparams, Mapping) else None
    batch = getattr(datamodule, "batch_size", None) if batch is None else batch
    accumulate = trainer.accumulate_grad_batches
    if isinstance(batch, int) and isinstance(accumulate, int):
        per_device_batch(batch, trainer.world_size, "effective", accumulate)


def check_optimizer(model: TrainModule, subcommand: str) -> None:
    """Before any rank starts: fit under automatic optimization needs configure_optimizers or
    an optimizer section (one line naming both, not a bare NotImplementedError per rank)."""
    from trainkit.errors import MisconfigurationError, no_optimizer
    from trainkit.module import defines_optimizers

    automatic = getattr(model, "automatic_optimization", True)
    if subcommand == "fit" and automatic and not defines_optimizers(model):
        raise MisconfigurationError(no_optimizer(type(model).__name__))


def settings_now(trainer: Trainer, model: TrainModule) -> RunSettings:
    """The run's settings as far as they are known before the ranks start (no optimizers yet)."""
    from trainkit.checkpoint.resume_changes import run_settings

    return run_settings(
        trainer.cli_config, model, None, trainer.strategy.precision, trainer.world_size, None
    )


def compare_settings(
    checkpoint: dict[str, Any], trainer: Trainer, model: TrainModule, path: str
) -> None:
    """Show what changed since the checkpoint's run and refuse what cannot resume, before the
    ranks start (they then compare only the optimizers they build)."""
    import os

    from trainkit.checkpoint import resume_changes

    resume_changes.check(
        checkpoint, settings_now(trainer, model), path, show=True, only_built=False
    )
    os.environ[resume_changes.CHECKED_ENV] = "1"


def says_it_once() -> bool:
    """Whether this process is the one that speaks for the job before training: the process
    the user started (not a rank trainkit's launcher started, whose parent already spoke), and
    under an external launcher (torchrun, srun, mpirun) only global rank 0."""
    import os

    from trainkit.cli.failures import says_it
    from trainkit.distributed.signals import LAUNCHED_ENV

    return LAUNCHED_ENV not in os.environ and says_it()


def say_untrained(trainer: Trainer, subcommand: str, ckpt_path: str | None) -> None:
    """After validate/test/predict ran without a checkpoint (on global rank 0): that it used
    the model as the config builds it, in one line (said after the stage, so that a mistake
    the stage finds stays the only line)."""
    if ckpt_path is None and subcommand != "fit" and trainer.is_global_zero:
        import sys

        print(
            f"trainkit: {subcommand} without --ckpt_path used the model as the config builds it "
            "(untrained weights); pass --ckpt_path last, best or a file to use a trained one",
            file=sys.stderr,
            flush=True,
        )


def check_ckpt_path(ckpt_path: str | None, root: str) -> None:
    """Fail early (exit 2) when a requested checkpoint cannot exist."""
    from trainkit.checkpoint.files import find_checkpoint

    if ckpt_path in (None, "last"):  # 'last' with none there starts from the model as built
        return
    if ckpt_path == "best":
        if find_checkpoint(root) is None:
            raise FileNotFoundError(
                f"ckpt_path {ckpt_path!r}: no checkpoint under {root!r}; expected a finished fit there; "
                "run fit first or pass a path"
            )
        return
    if not Path(ckpt_path).exists():
        raise FileNotFoundError(
            f"ckpt_path {ckpt_path!r} does not exist; expected 'last', 'best' or a file path"
        )
