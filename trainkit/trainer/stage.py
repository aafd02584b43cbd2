"""What happens around every stage: process group, log folder, data/module setup, teardown."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from trainkit.loggers.base import next_version

if TYPE_CHECKING:
    from trainkit.module import TrainModule
    from trainkit.trainer.trainer import Trainer


def setup_run(trainer: Trainer, stage: str, model: TrainModule, datamodule: Any) -> None:
    """Join the process group, agree on the log folder, then run prepare_data/setup hooks."""
    from trainkit.trainer.arguments import sort_callbacks

    strategy = trainer.strategy
    strategy.setup_environment()
    trainer.lightning_module = model
    model.trainer = trainer
    if datamodule is not None:
        trainer.datamodule = datamodule
        datamodule.trainer = trainer
    if not trainer._model_callbacks_added:
        trainer.callbacks = sort_callbacks([*trainer.callbacks, *model.configure_callbacks()])
        trainer._model_callbacks_added = True
    resolve_log_dir(trainer)
    if trainer.datamodule is not None:
        if strategy.local_rank == 0:
            trainer.datamodule.prepare_data()
        strategy.barrier()
        trainer.datamodule.setup(stage)
    model.setup(stage)
    for callback in trainer.callbacks:
        callback.setup(trainer, model, stage)


def teardown_run(trainer: Trainer, stage: str) -> None:
    """Undo setup_run's hooks, flush loggers, print the profile; the process group stays."""
    model = trainer.lightning_module
    for callback in trainer.callbacks:
        callback.teardown(trainer, model, stage)
    if model is not None:
        model.teardown(stage)
    if trainer.datamodule is not None:
        trainer.datamodule.teardown(stage)
    if trainer.is_global_zero:
        for logger in trainer.loggers:
            logger.finalize("success")
        if trainer.profiler.enabled:
            print(f"\nprofile ({stage}):\n{trainer.profiler.summary()}", flush=True)
    trainer._metric_store = None


def resolve_log_dir(trainer: Trainer) -> None:
    """Pick ``version_N`` on rank 0 and share it, so every rank writes to one folder."""
    if trainer._log_dir is not None:
        return
    if trainer.loggers:
        first = trainer.loggers[0]
        version = first.version
        if version is None and trainer.is_global_zero:
            version = next_version(Path(first.save_dir) / first.name)
        version = trainer.strategy.broadcast(version)
        for logger in trainer.loggers:
            if logger.version is None:
                logger.version = version
        trainer._log_dir = first.log_dir
    else:
        trainer._log_dir = trainer.default_root_dir
    if trainer.is_global_zero:
        Path(trainer._log_dir).mkdir(parents=True, exist_ok=True)
        if trainer.cli_config is not None:
            (Path(trainer._log_dir) / "config.yaml").write_text(trainer.cli_config)


def log_hyperparams(trainer: Trainer) -> None:
    """hparams.yaml in the log folder and hyperparameters in every logger (rank 0)."""
    if not trainer.is_global_zero:
        return
    import yaml

    from trainkit.checkpoint.io import plain_hparams

    params = dict(trainer.lightning_module.hparams)
    if trainer.datamodule is not None:
        params.update(trainer.datamodule.hparams)
    params = plain_hparams(params)
    if trainer.loggers:
        (Path(trainer.log_dir) / "hparams.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    if trainer.run_summary is not None:
        params.update(trainer.run_summary.as_hparams())  # the startup table, in the loggers only
    for logger in trainer.loggers:
        logger.log_hyperparams(params)
