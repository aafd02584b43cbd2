"""How one stage runs in this process: set up, restore, loop, report, tear down. The Trainer
owns one ``StageRunner`` and gives it the run state and the settings it reads."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import torch

from trainkit.callbacks.prediction_writer import BasePredictionWriter
from trainkit.checkpoint import state as checkpoint_state
from trainkit.checkpoint.files import CheckpointError, CheckpointWriteError
from trainkit.compiling import uncompiled
from trainkit.datamodule import DataModule
from trainkit.distributed import rank_board
from trainkit.distributed.launchers.spawn import SpawnLauncher, check_picklable
from trainkit.errors import ConfigError, MisconfigurationError
from trainkit.loops.evaluation import EvalLoop
from trainkit.loops.fit import FitLoop
from trainkit.loops.predict import PredictLoop
from trainkit.metrics import to_float
from trainkit.module import TrainModule
from trainkit.scaling import RunSummary, effective_batch_size
from trainkit.state import LoopLimits, RunningStage, RunState, TrainerFn, TrainerStatus
from trainkit.strategies import Strategy
from trainkit.trainer import spawned
from trainkit.trainer.arguments import check_stage_inputs, datamodule_given_as_loaders
from trainkit.trainer.loaders import prepare_loaders
from trainkit.trainer.lr_scaling import scale_lr_for_batch
from trainkit.trainer.readouts.callbacks import find_checkpoint_callback
from trainkit.trainer.stage import (
    discard_unfinished_run_folder,
    log_hyperparams,
    setup_fit,
    setup_run,
    teardown_run,
)
from trainkit.trainer.stage_settings import StageSettings
from trainkit.trainer.summary import describe_run, print_closing, print_summary, resumed
from trainkit.tuner.search import TunerExit

if TYPE_CHECKING:
    from trainkit.trainer.trainer import Trainer

FIRST_LOOP = {
    TrainerFn.FITTING: RunningStage.TRAINING,
    TrainerFn.VALIDATING: RunningStage.VALIDATING,
    TrainerFn.TESTING: RunningStage.TESTING,
    TrainerFn.PREDICTING: RunningStage.PREDICTING,
}


@dataclass(frozen=True)
class StageCall:
    """A stage method's call, resolved: what ``run`` runs here, or in each spawned rank."""

    stage: TrainerFn
    module: TrainModule
    datamodule: DataModule | None
    ckpt_path: str | None
    loaders: tuple  # the stage method's loader arguments
    weights_only: bool | None  # how the checkpoint loads (None: the Trainer's setting)


class StageRunner:
    """Runs fit/validate/test/predict in this process, from the run state it is given.

    ``owner`` is the Trainer, which the module, the data module and the callbacks get as their
    ``trainer``; the runner only hands it over and never reads it."""

    def __init__(self, state: RunState, owner: Trainer, settings: StageSettings) -> None:
        self.state = state
        self.owner = owner
        self.settings = settings
        self.run_summary: RunSummary | None = None  # the startup numbers of the latest fit
        self._closing: Callable[[], None] | None = None  # a fit's closing lines, after teardown

    @property
    def strategy(self) -> Strategy:
        return self.state.strategy

    @property
    def effective_batch_size(self) -> int | None:
        """Samples per optimizer step across every rank (None before the train loader is known)."""
        batch = getattr(self.state.given.train_loader, "batch_size", None)
        if batch is None:
            return None
        nodes, strategy = self.settings.num_nodes, self.strategy
        devices = strategy.world_size // nodes if strategy.is_distributed else 1
        accumulate = self.state.limits.accumulate_grad_batches
        return effective_batch_size(batch, devices, nodes, accumulate, strategy.batch_loading)

    def save_checkpoint(
        self, filepath: str, weights_only: bool = False, storage_options: object = None
    ) -> None:
        """Write a checkpoint (call on every rank; global rank 0 writes); ``weights_only``:
        without optimizer, scheduler and callback state (it cannot resume a fit)."""
        state = self.state
        state.board.mark(rank_board.CHECKPOINT)
        # through the run's CheckpointIO
        checkpoint_state.save(state, filepath, weights_only, storage_options)
        self.strategy.barrier()

    def launch(
        self,
        stage: TrainerFn,
        model: TrainModule | None,
        datamodule: DataModule | None,
        ckpt_path: str | None,
        loaders: tuple,
        weights_only: bool | None = None,
    ) -> Any:
        """Run ``stage`` in this process, or in the ranks the strategy's launcher starts (rank
        0's output comes back); ``model`` and ``datamodule`` default to the last stage's."""
        state = self.state
        model, compiled_by_user = uncompiled(model)
        if compiled_by_user is not None and state.compile_options is None:
            state.compile_options = compiled_by_user
        datamodule, loaders = datamodule_given_as_loaders(datamodule, loaders)
        data = datamodule if datamodule is not None else state.given.datamodule
        check_stage_inputs(stage, model if model is not None else state.given.module, data, loaders)
        module: TrainModule = model if model is not None else state.require_module()
        self.strategy.check_module(module)
        if ckpt_path is not None:  # a given checkpoint replaces the one set as trainer.ckpt_path
            state.chosen_ckpt_path = None
        ckpt_path = ckpt_path if ckpt_path is not None else state.chosen_ckpt_path
        call = StageCall(stage, module, datamodule, ckpt_path, loaders, weights_only)
        launcher = self.strategy.launcher(self.settings.max_restarts)
        if launcher is None:
            return self.run(call)
        module.trainer = None
        if isinstance(launcher, SpawnLauncher):  # its strategy: ours, or our forked twin
            state.strategy = launcher.strategy
            named = {"model": module, "datamodule": datamodule, "callbacks": state.given.callbacks}
            check_picklable({**named, "dataloaders": loaders})
        result = launcher.launch(self.run_in_spawned_rank, call)
        spawned.adopt_rank_result(state, result, module, datamodule)  # rank 0's
        module.trainer = self.owner
        return result["output"]

    def run(self, call: StageCall) -> Any:
        """Run the stage ('fit', 'validate', 'test', 'predict') of ``call`` in this process;
        returns what the stage method returns."""
        state, stage, ckpt_path, loaders = self.state, call.stage, call.ckpt_path, call.loaders
        state.board.mark(rank_board.SETUP)
        now = state.trainer_state
        now.fn, now.stage, now.status = stage, FIRST_LOOP[stage], TrainerStatus.RUNNING
        weights_only = call.weights_only
        if weights_only is None:
            weights_only = self.settings.checkpoint_weights_only
        status, mistake = "success", False
        failure: BaseException | None = None
        try:
            ckpt_path = self._checkpoint_file(ckpt_path, weights_only)  # 'last'/'best' resolved
            state.ckpt_path = ckpt_path
            evaluated = ckpt_path if stage != "fit" else None
            setup_run(state, self.owner, stage, call.module, call.datamodule, evaluated)
            if stage == "fit":
                return self._fit(ckpt_path, weights_only, *loaders)
            if stage == "predict":
                return self._predict(ckpt_path, weights_only, *loaders)
            return self._evaluate(stage, ckpt_path, weights_only, *loaders)
        except TunerExit:  # the Tuner ran this stage only to tune: it ends after the search
            return None
        except BaseException as error:
            failure = error
            now.status = TrainerStatus.INTERRUPTED
            state.hooks.call_callbacks("on_exception", error)
            if state.given.datamodule is not None:
                state.given.datamodule.on_exception(error)
            checkpoint_state.finish_saves(state, error)  # the save in flight lands first
            status = "failed"
            mistake = isinstance(error, (ConfigError, MisconfigurationError, CheckpointError))
            mistake = mistake and not isinstance(error, CheckpointWriteError)  # a full disk: kept
            raise
        finally:
            try:
                teardown_run(state, stage, status)
            except Exception as teardown_error:  # (a logger writing into a full or read-only
                if failure is None:  # folder): the run's own failure stays the one reported
                    raise
                failure.add_note(f"also, while tearing the run down: {teardown_error}")
            if mistake or failure is not None:  # a failed run leaves no empty version behind
                discard_unfinished_run_folder(state)
            state.created_log_dir = False  # later stages' failures keep this stage's folder
            if status == "success":
                now.status, now.stage = TrainerStatus.FINISHED, None
            closing, self._closing = self._closing, None
            if closing is not None:
                closing()

    def run_in_spawned_rank(self, strategy: Strategy, call: StageCall) -> dict[str, Any]:
        """In a spawned rank: run the stage with this rank's strategy; what rank 0 sends back."""
        self.state.strategy = strategy
        output = self.run(call)
        return spawned.rank_result(self.state, output)

    def _checkpoint_file(self, ckpt_path: str | None, weights_only: bool) -> str | None:
        if ckpt_path is None:
            return None
        return checkpoint_state.resolve_path(
            ckpt_path,
            find_checkpoint_callback(self.state.given.callbacks),
            self.state.default_root_dir,
            weights_only,
        )

    def _restore(self, path: str | None, full: bool, weights_only: bool) -> str | None:
        """Load the checkpoint file ``path`` (fully, to resume fit) and say so; returns it."""
        if path is None:
            return None
        state = self.state
        checkpoint = checkpoint_state.restore(state, path, full, weights_only)
        if self.strategy.is_global_zero:
            epoch = state.position.epoch if full else checkpoint.get("epoch", "?")
            at = f"epoch {epoch}, step {state.position.global_step}"
            what = f"resuming at {at}" if full else f"evaluating the weights of {at}"
            print(f"trainkit: loaded {path}; {what}", flush=True)
        return path

    def _fit(
        self,
        ckpt_path: str | None,
        weights_only: bool,
        train_loaders: object,
        val_loaders: object,
    ) -> None:
        state, settings, started = self.state, self.settings, time.perf_counter()
        setup_fit(state, self._loaders("train", train_loaders), self._loaders("val", val_loaders))
        effective = self.effective_batch_size
        lr = scale_lr_for_batch(
            state, settings.lr_scaling, settings.reference_batch_size, effective
        )
        planned = settings.dry_run_of or state.limits  # a dry run describes the real run
        self.run_summary = describe_run(state, settings.selection, effective, lr, planned)
        resumed_from = self._restore(ckpt_path, True, weights_only)
        if resumed_from is not None:
            self.run_summary = resumed(self.run_summary, resumed_from, state, planned)
        log_hyperparams(state, self.run_summary)
        show_summary = settings.show_summary and self.strategy.is_global_zero
        if show_summary:
            print_summary(self.run_summary)
        if settings.dry_run_of is not None and resumed_from is not None:
            from trainkit.trainer import dry_run

            position = state.position
            if self.run_summary.total_steps == position.global_step:
                if self.strategy.is_global_zero:
                    print(dry_run.nothing_left(position.global_step), flush=True)
                return
            skip = state.stop.resume.skip if state.stop.resume is not None else 0
            state.limits = dry_run.limits_after(
                state.limits, position.epoch, position.global_step, skip
            )
        from trainkit.loops.preemption import run_watching_stop_signals

        # loaders from the module's or datamodule's hooks can be asked for again: every N
        # epochs, or at a new batch size (BatchSizeFinder)
        reload = self._reloader(val_loaders) if train_loaders is None else None
        state.given = replace(state.given, reload_loaders=reload)
        checkpoint_callback = find_checkpoint_callback(state.given.callbacks)
        log_dir = state.log_dir or state.default_root_dir
        with torch.autograd.set_detect_anomaly(settings.detect_anomaly):
            run_watching_stop_signals(
                state,
                FitLoop(state).run,
                self._save_preemption_checkpoint,
                checkpoint_state.last_checkpoint_path(checkpoint_callback, log_dir),
            )
        checkpoint_state.finish_saves(state)  # the save in flight is on disk; a failed one raises
        if settings.dry_run_of is not None:
            self._report_dry_run(settings.dry_run_of)
            return
        if show_summary and state.stop.preempted is None:
            # said once the stage is torn down: a progress bar still drawing would overwrite it
            seconds = time.perf_counter() - started
            self._closing = lambda: print_closing(state, checkpoint_callback, seconds)

    def _report_dry_run(self, planned: LoopLimits) -> None:
        """Check what the batches logged against what is monitored, gather every rank's
        measurements and print them with the estimate (global rank 0)."""
        from trainkit.trainer import dry_run

        state = self.state
        probe = dry_run.find_probe(state)
        assert probe is not None, "a dry run's Trainer adds its probe"
        dry_run.check_monitors(state, dict(state.metrics.callback_metrics))
        rank = self.strategy.global_rank
        readings = self.strategy.all_gather_object(probe.reading(rank, state.require_module()))
        if self.strategy.is_global_zero and self.run_summary is not None:
            print(dry_run.report(self.run_summary, planned, state, readings), flush=True)

    def _save_preemption_checkpoint(self, path: str) -> None:
        self.save_checkpoint(path)
        callback = find_checkpoint_callback(self.state.given.callbacks)
        if callback is not None:
            callback.last_model_path = path

    def _evaluate(
        self,
        stage: str,
        ckpt_path: str | None,
        weights_only: bool,
        dataloaders: object,
        verbose: bool,
    ) -> list[dict[str, float]]:
        kind = "val" if stage == "validate" else "test"
        loaders = self._evaluation_loaders(stage, kind, dataloaders, ckpt_path, weights_only)
        loop_stage = "validation" if stage == "validate" else "test"
        results = EvalLoop(self.state, loop_stage).run(
            loaders, self.state.limits.limit_for(loop_stage)
        )
        as_floats = [{k: to_float(v) for k, v in r.items()} for r in results]
        if verbose and self.strategy.is_global_zero:
            from trainkit.trainer.report import print_metrics

            print_metrics(stage, as_floats)
        return as_floats

    def _predict(
        self,
        ckpt_path: str | None,
        weights_only: bool,
        dataloaders: object,
        return_predictions: bool | None = None,
    ) -> list[Any] | None:
        loaders = self._evaluation_loaders(
            "predict", "predict", dataloaders, ckpt_path, weights_only
        )
        limit = self.state.limits.limit_predict_batches
        # a writer that writes at the epoch's end is given every prediction, even when the
        # caller asked for none back (as Lightning keeps them)
        written_at_end = any(
            isinstance(cb, BasePredictionWriter) and cb.interval.on_epoch
            for cb in self.state.given.callbacks
        )
        keep = return_predictions is not False or written_at_end
        outputs = PredictLoop(self.state).run(loaders, limit, keep)
        if return_predictions is False:
            return None
        return outputs[0] if len(outputs) == 1 else outputs

    def _evaluation_loaders(
        self, stage: str, kind: str, given: object, ckpt_path: str | None, weights_only: bool
    ) -> list[Any]:
        """The loaders of validate/test/predict, with the module on its device and weights loaded."""
        state = self.state
        loaders = self._loaders(kind, given)
        reload = self._reloader(None) if given is None else None
        state.given = replace(state.given, stage_loaders=loaders, reload_loaders=reload)
        if not loaders and self._limit(kind) != 0:
            raise MisconfigurationError(
                f"{stage} needs data: pass dataloaders or a datamodule with one"
            )
        state.require_module().to(self.strategy.root_device)
        self._restore(ckpt_path, False, weights_only)
        # the stage's loaders by kind: trainer.val_dataloaders, test_dataloaders...
        state.given = replace(state.given, **{f"{kind}_loaders": loaders})
        return loaders

    def _limit(self, kind: str) -> int | float:
        """``limit_{kind}_batches`` (kind: train, val, test or predict)."""
        return getattr(self.state.limits, f"limit_{kind}_batches")

    def _reloader(self, val_given: object) -> Callable[[str], list[Any]]:
        """Asks the module's or datamodule's hooks for a kind's loaders again (the validation
        loaders given to fit stay those)."""
        return lambda kind: self._loaders(kind, val_given if kind == "val" else None)

    def _loaders(self, kind: str, given: object) -> list[Any]:
        """The stage's loaders (given, else from the datamodule or module), ready for the strategy;
        as Lightning, a hook is not asked for the loaders that a limit of 0 skips."""
        if given is None and self._limit(kind) == 0:
            return []
        if given is None:
            datamodule = self.state.given.datamodule
            source = datamodule if datamodule is not None else self.state.given.module
            method = getattr(source, f"{kind}_dataloader", None)
            given = method() if callable(method) else None
            if given is None and kind == "train" and callable(method):
                raise MisconfigurationError(
                    f"{type(source).__name__}.train_dataloader() returned None; expected a "
                    "DataLoader (or any iterable of batches); return the loader it builds"
                )
        return prepare_loaders(
            given,
            kind,
            self.strategy,
            self.settings.use_distributed_sampler,
            self.settings.batch_size_mode,
            unshuffled=self.state.limits.overfit_batches > 0,
            accumulate=self.state.limits.accumulate_grad_batches,
        )
