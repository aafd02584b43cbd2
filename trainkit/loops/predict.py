"""The predict loop: ``predict_step`` over the predict loaders, collecting what it returns."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from trainkit.data import IndexRecorder, limited_batches, recording_indices, say_empty_loaders
from trainkit.loops.batches import BatchCalls, run_batches
from trainkit.loops.iterate import batch_transfer
from trainkit.module import without_batch_idx
from trainkit.state import RunState


class PredictLoop:
    """Run ``predict_step`` over predict loaders and collect what it returns, with the dataset
    indices of each batch (what ``BasePredictionWriter`` writes beside the predictions)."""

    def __init__(self, state: RunState) -> None:
        self.state = state
        self._predictions: list[list[Any]] = []
        self.epoch_batch_indices: list[list[list[int]]] = []  # per loader, per batch
        self.current_batch_indices: list[int] = []
        self._recorder: IndexRecorder | None = None  # of the loader running
        self._indices: list[list[int]] = []  # of the loader running: per batch
        state.predict_loop = self

    def _record_indices(self, batch: object, batch_idx: int) -> None:
        recorder = self._recorder
        self.current_batch_indices = recorder.seen[batch_idx] if recorder else []
        self._indices.append(self.current_batch_indices)

    @property
    def predictions(self) -> list[Any]:
        """The outputs so far: a list per loader, or one list when there is one loader."""
        return self._predictions[0] if len(self._predictions) == 1 else self._predictions

    def run(self, loaders: list[Any], limit: int | float, keep: bool = True) -> list[list[Any]]:
        """One list of step outputs per loader (up to ``limit`` batches each); ``keep=False``:
        none kept (``predict(return_predictions=False)``, for a writer callback)."""
        state = self.state
        module = state.require_module()
        hooks = state.hooks
        predict_step = without_batch_idx(
            module, "predict_step", state.strategy.step_fn(module, "predict_step")
        )
        start_hooks = hooks.bound("on_predict_batch_start")
        end_hooks = hooks.bound("on_predict_batch_end")
        module.on_predict_model_eval()
        if limit != 0:
            say_empty_loaders(state, "predict", loaders)
        outputs = self._predictions = [[] for _ in loaders]
        self.epoch_batch_indices = [[] for _ in loaders]
        with torch.inference_mode() if state.inference_mode else torch.no_grad():
            hooks.call("on_predict_start")
            hooks.call("on_predict_epoch_start")
            for loader_idx, loader in enumerate(loaders):
                total = limited_batches(loader, limit, "limit_predict_batches")
                extra = (loader_idx,) if len(loaders) > 1 else ()  # as Lightning passes it
                to_device = batch_transfer(
                    state.strategy, module, state.given.datamodule, loader_idx
                )
                collected = outputs[loader_idx]
                loader, self._recorder = recording_indices(loader)
                self._indices = self.epoch_batch_indices[loader_idx]
                calls = BatchCalls(
                    predict_step,
                    start_hooks,
                    end_hooks,
                    seen=self._record_indices,
                    stepped=collecting(collected) if keep else None,
                )
                run_batches(state, calls, loader, total, to_device, extra)
            hooks.call("on_predict_epoch_end")
            hooks.call("on_predict_end")
        return outputs


def collecting(collected: list[Any]) -> Callable[[Any], Any]:
    """Keeps each step output in ``collected`` and passes it on to the batch-end hooks."""

    def keep(output: Any) -> Any:
        collected.append(output)
        return output

    return keep
