"""What happens around every stage: process group, log folder, data/module setup, teardown."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import torch

from trainkit.callbacks.base import Callback
from trainkit.common.hooks import overrides
from trainkit.compiling import compile_forward, restore_forward
from trainkit.cycle_collector import rare_collections
from trainkit.datamodule import DataModule
from trainkit.distributed.rank_board import RankBoard
from trainkit.errors import MisconfigurationError
from trainkit.loggers.base import Logger, next_version
from trainkit.loops.hooks import HookDispatcher
from trainkit.loops.metric_hub import MetricHub
from trainkit.loops.training_step import TrainingStep
from trainkit.module import TrainModule, defines_optimizers
from trainkit.optim import parse_optimizers
from trainkit.profilers import Profiler
from trainkit.scaling import RunSummary
from trainkit.state import LoopLimits, RunState, StageInputs, TrainerFn
from trainkit.strategies import Strategy
from trainkit.strategies.precision import Precision
from trainkit.trainer.arguments import sort_callbacks

if TYPE_CHECKING:
    from trainkit.trainer.trainer import Trainer


def new_run_state(
    owner: Trainer,
    limits: LoopLimits,
    strategy: Strategy,
    precision: Precision,
    profiler: Profiler,
    callbacks: list[Callback],
    loggers: list[Logger],
    default_root_dir: str,
) -> RunState:
    """A fresh run state with its hook dispatcher (passing ``owner``, the Trainer, to callbacks)
    and metric hub."""
    state = RunState(
        limits=limits,
        strategy=strategy,
        precision=precision,
        # the dispatcher and the hub receive the state itself: set right below
        hooks=cast(HookDispatcher, None),
        metrics=cast(MetricHub, None),
        profiler=profiler,
        board=RankBoard(),
        given=StageInputs(callbacks=callbacks, loggers=loggers),
        default_root_dir=default_root_dir,
    )
    state.hooks = HookDispatcher(owner, state)
    state.metrics = MetricHub(state)
    return state


def publish_rank(rank: int) -> None:
    """Tell rank-zero-only decorators this process's rank: ``rank_zero_only.rank``, one object
    for trainkit, lightning_utilities and torchmetrics (Lightning-era code uses it too)."""
    from trainkit.distributed.comm import set_rank

    set_rank(rank)


def setup_run(
    state: RunState,
    owner: Trainer,
    stage: TrainerFn | str,
    model: TrainModule,
    datamodule: DataModule | None,
    evaluated: str | None = None,
) -> None:
    """Join the process group, agree on the log folder, then run prepare_data/setup hooks;
    ``owner`` (the Trainer) is what ``model.trainer`` and ``datamodule.trainer`` become;
    ``evaluated``: the checkpoint a validate/test/predict run loads (its results go beside it)."""
    strategy = state.strategy
    strategy.setup_environment()
    publish_rank(strategy.global_rank)
    state.trainer_state.fn = fn = TrainerFn(stage)
    stage = fn.value  # the hooks get the plain name ('fit'), equal to the enum's member
    state.position.fitting = fn is TrainerFn.FITTING
    state.metrics.reset()
    state.said_empty.clear()
    given = state.given
    state.given = given = replace(
        given, module=model, datamodule=datamodule if datamodule is not None else given.datamodule
    )
    model.trainer = owner
    if datamodule is not None:
        datamodule.trainer = owner
    if not state.model_callbacks_added:  # in place: trainer.callbacks stays the list it was
        given.callbacks[:] = sort_callbacks([*given.callbacks, *model.configure_callbacks()])
        state.model_callbacks_added = True
    if evaluated is not None:
        join_run_of(state.given.loggers, evaluated)
    resolve_log_dir(state)
    state.profiler.setup(stage, strategy.local_rank, state.log_dir)
    prepare_data(state, model)
    if state.given.datamodule is not None:  # Lightning's order, and the stage by keyword
        state.given.datamodule.setup(stage=stage)
    state.hooks.call_callbacks("setup", stage=stage)
    model.setup(stage=stage)
    # layers built here: shard-first under fsdp when fitting, on the device otherwise
    sharded = fn is TrainerFn.FITTING
    with strategy.module_init_context() if sharded else torch.device(strategy.root_device):
        model.configure_model()


def prepare_data(state: RunState, model: TrainModule) -> None:
    """``prepare_data`` of the data module, then of the module, where they define one: on local
    rank 0 of each node (global rank 0 where ``prepare_data_per_node`` is False) while the
    other ranks wait."""
    strategy = state.strategy
    for owner, base in ((state.given.datamodule, DataModule), (model, TrainModule)):
        if owner is None or not overrides(owner, base, "prepare_data"):
            continue
        per_node = getattr(owner, "prepare_data_per_node", True)
        if strategy.local_rank == 0 and (per_node or strategy.node_rank == 0):
            owner.prepare_data()
        strategy.barrier()


def teardown_run(state: RunState, fn: TrainerFn, status: str = "success") -> None:
    """Undo setup_run's hooks, finalize loggers with ``status`` ('success' or 'failed'), print
    the profile; the process group stays."""
    stage = TrainerFn(fn).value
    model = state.given.module
    if model is not None and state.compile_options is not None:
        restore_forward(model)
    if state.given.datamodule is not None:  # Lightning's order, and the stage by keyword
        state.given.datamodule.teardown(stage=stage)
    state.hooks.call_callbacks("teardown", stage=stage)
    if model is not None:
        model.teardown(stage=stage)
    if state.strategy.is_global_zero:
        for logger in state.given.loggers:
            logger.finalize(status)
        if state.profiler.enabled:
            state.profiler.describe()
    state.metrics.active = None


def join_run_of(loggers: list[Any], checkpoint: str) -> None:
    """Loggers without a version write into the run folder that holds ``checkpoint``
    (``save_dir/name/version_N/checkpoints/x.ckpt``), so an evaluation sits beside its fit."""
    path = Path(checkpoint).resolve()
    run = path.parent.parent if path.parent.name == "checkpoints" else None
    for logger in loggers:
        if run is None or logger.version is not None:  # a version: a run of its own
            continue
        if run.parent == Path(logger.root_dir).resolve():
            number = run.name.removeprefix("version_")
            logger.version = int(number) if number.isdigit() else run.name


def resolve_log_dir(state: RunState) -> None:
    """Pick ``version_N`` on rank 0 and share it, so every rank writes to one folder."""
    if state.log_dir is not None:
        return
    strategy = state.strategy
    if state.given.loggers:
        from trainkit.loggers.tracking import TrackingLogger

        for (
            logger
        ) in state.given.loggers:  # a remote store's run keeps its files here (Lightning's rule)
            if isinstance(logger, TrackingLogger) and logger.save_dir is None:
                logger.files_root = state.default_root_dir
        first = state.given.loggers[0]
        version = first.version
        if version is None and strategy.is_global_zero:
            version = next_version(first.root_dir)
        version = strategy.broadcast(version)
        for logger in state.given.loggers:
            if logger.version is None:
                logger.version = version
        # rank 0's: a remote store's experiment id is known where the run started
        state.log_dir = strategy.broadcast(first.log_dir if strategy.is_global_zero else None)
    else:
        state.log_dir = state.default_root_dir
    if strategy.is_global_zero and state.log_dir is not None:  # SaveConfigCallback writes there
        state.created_log_dir = bool(state.given.loggers) and not Path(state.log_dir).exists()
        Path(state.log_dir).mkdir(parents=True, exist_ok=True)


def discard_unfinished_run_folder(state: RunState) -> None:
    """After a failed run: rank 0 removes the version folder this run made when it holds
    nothing the run wrote (only the config it was given), so the corrected run is not the
    next version beside an empty one; what was logged stays, as under Lightning."""
    if not (state.created_log_dir and state.strategy.is_global_zero and state.log_dir):
        return
    folder, root = Path(state.log_dir), Path(state.default_root_dir).resolve()
    # as Lightning's: what the run logged (metrics.csv, events, hparams.yaml) stays
    # (config.yaml is the input the run was given, written before it ran: not a result)
    logged = (p for p in folder.rglob("*") if p.is_file() and p.name != "config.yaml")
    if folder.is_dir() and not any(logged):
        shutil.rmtree(folder, ignore_errors=True)
        parent = folder.resolve().parent  # the logger's name folder, when nothing else is in it
        while parent != root and root in parent.parents and not any(parent.iterdir()):
            parent.rmdir()
            parent = parent.parent
    state.created_log_dir = False


def log_hyperparams(state: RunState, run_summary: RunSummary | None) -> None:
    """hparams.yaml in the log folder and hyperparameters in every logger (rank 0)."""
    if not state.strategy.is_global_zero:
        return
    import yaml

    from trainkit.checkpoint.files import plain_hparams

    module = state.require_module()
    params = dict(module.hparams) if module.log_hyperparams else {}
    if state.given.datamodule is not None and state.given.datamodule.log_hyperparams:
        params.update(state.given.datamodule.hparams)
    params = plain_hparams(params)
    # as Lightning: no hyperparameters saved (or saved with logger=False) sends none
    sent = bool(params)  # nothing saved: Lightning's loggers get no log_hyperparams call
    if sent and state.given.loggers and state.log_dir is not None:
        (Path(state.log_dir) / "hparams.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    summary = run_summary.as_hparams() if run_summary is not None else {}
    for logger in state.given.loggers:  # the startup table too, where hyperparameters are displayed
        if sent or not logger.keeps_hparams_file:
            logger.log_hyperparams(params if logger.keeps_hparams_file else {**params, **summary})
        logger.log_graph(module)


def setup_model_and_optimizers(state: RunState) -> None:
    """Wrap the module for the strategy and build its optimizers and schedulers (from
    configure_optimizers, or the CLI's optimizer section)."""
    module, strategy = state.require_module(), state.strategy
    if state.compile_options is not None:
        compile_forward(module, state.compile_options)
    with rare_collections():  # the strategy's wrapper and the optimizers import torch._dynamo
        wrapped = strategy.setup_module(module)
        if module.automatic_optimization or defines_optimizers(module):
            state.optimizers, state.lr_scheduler_configs = parse_optimizers(
                module.configure_optimizers(), manual=not module.automatic_optimization
            )
        state.optimizer_types = [type(optimizer) for optimizer in state.optimizers]
        state.wrapped, state.optimizers = strategy.setup_optimizers(
            wrapped, state.optimizers, state.lr_scheduler_configs
        )
    if module.automatic_optimization and len(state.optimizers) > 1:
        raise MisconfigurationError(
            f"{len(state.optimizers)} optimizers need manual optimization: set "
            "self.automatic_optimization = False and step them in training_step"
        )
    accumulate, clip = state.limits.accumulate_grad_batches, state.limits.gradient_clip_val
    if not module.automatic_optimization and accumulate != 1:  # as Lightning's
        raise MisconfigurationError(
            "Automatic gradient accumulation is not supported for manual optimization. Remove "
            f"`Trainer(accumulate_grad_batches={accumulate})` or switch to automatic optimization."
        )
    if not module.automatic_optimization and clip:
        raise MisconfigurationError(
            "Automatic gradient clipping is not supported for manual optimization. Remove "
            f"`Trainer(gradient_clip_val={clip})` or switch to automatic optimization."
        )


def setup_fit(state: RunState, train: list[Any], val: list[Any]) -> None:
    """Loaders, wrapped model, optimizers and the optimizer step of a fit (with
    ``limit_train_batches=0`` no training loader: the fit trains nothing, as Lightning's)."""
    if not train and state.limits.limit_train_batches != 0:
        raise MisconfigurationError(
            "fit needs training data: pass train_dataloaders, a datamodule, or define train_dataloader"
        )
    val = val if state.limits.limit_val_batches != 0 else []
    state.given = replace(state.given, train_loader=train[0] if train else None, val_loaders=val)
    setup_model_and_optimizers(state)
    state.stepper = TrainingStep(state)
