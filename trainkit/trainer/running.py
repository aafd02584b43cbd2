"""How the Trainer runs one stage in this process: set up, restore, loop, report, tear down."""

from __future__ import annotations

import time
from typing import Any

import torch

from trainkit.checkpoint import state as checkpoint_state
from trainkit.distributed import rank_board
from trainkit.errors import MisconfigurationError
from trainkit.loops.evaluation import EvalLoop
from trainkit.loops.fit import FitLoop
from trainkit.loops.predict import PredictLoop
from trainkit.metrics import to_float
from trainkit.module import TrainModule
from trainkit.trainer.loaders import prepare_loaders
from trainkit.trainer.properties import TrainerProperties
from trainkit.trainer.stage import log_hyperparams, setup_fit, setup_run, teardown_run
from trainkit.trainer.summary import print_closing, print_summary, resumed, summarize_run


class StageRunner(TrainerProperties):
    """Mixed into Trainer: runs fit/validate/test/predict in this process from the run state."""

    checkpoint_weights_only: bool
    use_distributed_sampler: bool
    batch_size_mode: str
    selection: Any
    lr_scaling: str
    reference_batch_size: int | None
    detect_anomaly: bool
    _show_summary: bool

    def init_module(self, empty_init: bool | None = None) -> Any:
        """A context to build the module in: on the device, or on the meta device under fsdp
        (each rank then materialises only its shard); ``empty_init=False`` builds it fully."""
        return self.strategy.module_init_context(empty_init)

    def save_checkpoint(self, filepath: str, weights_only: bool = False) -> None:
        """Write a checkpoint (call on every rank; global rank 0 writes); ``weights_only``:
        without optimizer, scheduler and callback state (it cannot resume a fit)."""
        state = self.run_state
        state.board.mark(rank_board.CHECKPOINT)
        checkpoint_state.save(state, filepath, weights_only)  # through the run's CheckpointIO
        self.strategy.barrier()

    def _run_stage(
        self, stage: str, model: TrainModule, datamodule: Any, ckpt_path: str | None, loaders: tuple
    ) -> Any:
        state = self.run_state
        state.board.mark(rank_board.SETUP)
        status = "success"
        try:
            ckpt_path = self._checkpoint_file(ckpt_path)  # 'last'/'best' resolved once, here
            evaluated = ckpt_path if stage != "fit" else None
            setup_run(state, self, stage, model, datamodule, evaluated)
            if stage == "fit":
                return self._fit(ckpt_path, *loaders)
            if stage == "predict":
                return self._predict(ckpt_path, *loaders)
            return self._evaluate(stage, ckpt_path, *loaders)
        except BaseException as error:
            state.hooks.call_callbacks("on_exception", error)
            checkpoint_state.finish_saves(state, error)  # the save in flight lands first
            status = "failed"
            raise
        finally:
            teardown_run(state, stage, status)

    def _checkpoint_file(self, ckpt_path: str | None) -> str | None:
        if ckpt_path is None:
            return None
        return checkpoint_state.resolve_path(
            ckpt_path, self.checkpoint_callback, self.default_root_dir, self.checkpoint_weights_only
        )

    def _restore(self, path: str | None, full: bool) -> str | None:
        """Load the checkpoint file ``path`` (fully, to resume fit) and say so; returns it."""
        if path is None:
            return None
        checkpoint = checkpoint_state.restore(
            self.run_state, path, full, self.checkpoint_weights_only
        )
        if self.is_global_zero:
            epoch = self.current_epoch if full else checkpoint.get("epoch", "?")
            at = f"epoch {epoch}, step {self.global_step}"
            what = f"resuming at {at}" if full else f"evaluating the weights of {at}"
            print(f"trainkit: loaded {path}; {what}", flush=True)
        return path

    def _fit(self, ckpt_path: str | None, train_loaders: Any, val_loaders: Any) -> None:
        state, started = self.run_state, time.perf_counter()
        setup_fit(state, self._loaders("train", train_loaders), self._loaders("val", val_loaders))
        self.run_summary = summarize_run(
            state,
            self.selection,
            self.lr_scaling,
            self.reference_batch_size,
            self.effective_batch_size,
        )
        resumed_from = self._restore(ckpt_path, full=True)
        if resumed_from is not None:
            self.run_summary = resumed(self.run_summary, resumed_from, state)
        log_hyperparams(state, self.run_summary)
        if self.is_global_zero and self._show_summary:
            print_summary(self.run_summary)
        from trainkit.loops.preemption import run_watching_stop_signals

        if train_loaders is None and state.limits.reload_dataloaders_every_n_epochs:
            state.reload_loaders = lambda: (
                self._loaders("train", None),
                self._loaders("val", None),
            )
        with torch.autograd.set_detect_anomaly(self.detect_anomaly):
            run_watching_stop_signals(
                state,
                FitLoop(state).run,
                self._save_preemption_checkpoint,
                checkpoint_state.last_checkpoint_path(self.checkpoint_callback, self.log_dir),
            )
        checkpoint_state.finish_saves(state)  # the save in flight is on disk; a failed one raises
        if self.is_global_zero and self._show_summary and self.preempted is None:
            print_closing(state, self.checkpoint_callback, time.perf_counter() - started)

    def _save_preemption_checkpoint(self, path: str) -> None:
        self.save_checkpoint(path)
        callback = self.checkpoint_callback
        if callback is not None:
            callback.last_model_path = path

    def _evaluate(
        self, stage: str, ckpt_path: str | None, dataloaders: Any, verbose: bool
    ) -> list[dict[str, float]]:
        kind = "val" if stage == "validate" else "test"
        loaders = self._evaluation_loaders(stage, kind, dataloaders, ckpt_path)
        loop_stage = "validation" if stage == "validate" else "test"
        results = EvalLoop(self.run_state, loop_stage).run(
            loaders, self.run_state.limits.limit_for(loop_stage)
        )
        as_floats = [{k: to_float(v) for k, v in r.items()} for r in results]
        if verbose and self.is_global_zero:
            from trainkit.trainer.report import print_metrics

            print_metrics(stage, as_floats)
        return as_floats

    def _predict(self, ckpt_path: str | None, dataloaders: Any) -> list[Any]:
        loaders = self._evaluation_loaders("predict", "predict", dataloaders, ckpt_path)
        limit = self.run_state.limits.limit_predict_batches
        outputs = PredictLoop(self.run_state).run(loaders, limit)
        return outputs[0] if len(outputs) == 1 else outputs

    def _evaluation_loaders(
        self, stage: str, kind: str, given: Any, ckpt_path: str | None
    ) -> list[Any]:
        """The loaders of validate/test/predict, with the module on its device and weights loaded."""
        loaders = self._loaders(kind, given)
        if not loaders:
            raise MisconfigurationError(
                f"{stage} needs data: pass dataloaders or a datamodule with one"
            )
        self.lightning_module.to(self.strategy.root_device)
        self._restore(ckpt_path, full=False)
        return loaders

    def _loaders(self, kind: str, given: Any) -> list[Any]:
        """The stage's loaders (given, else from the datamodule or module), ready for the strategy."""
        if given is None:
            source = self.datamodule if self.datamodule is not None else self.lightning_module
            method = getattr(source, f"{kind}_dataloader", None)
            given = method() if callable(method) else None
        return prepare_loaders(
            given,
            kind,
            self.strategy,
            self.use_distributed_sampler,
            self.batch_size_mode,
            unshuffled=self.run_state.limits.overfit_batches > 0,
        )
