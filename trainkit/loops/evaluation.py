"""The evaluation loop: one pass over validation or test loaders, reducing what was logged."""

from __future__ import annotations

import functools
import math
from typing import Any

import torch

from trainkit.common.hooks import overrides
from trainkit.data import limited_batches, say_empty_loaders
from trainkit.loops.batches import BatchCalls, run_batches
from trainkit.loops.iterate import batch_transfer
from trainkit.module import TrainModule, without_batch_idx
from trainkit.state import RunState, TrainerFn


class EvalLoop:
    """One pass of ``validation_step`` or ``test_step`` over the given loaders."""

    def __init__(self, state: RunState, stage: str) -> None:
        self.state = state
        self.stage = stage

    def run(self, loaders: list[Any], limit: int | float) -> list[dict[str, torch.Tensor]]:
        """Run every loader (up to ``limit`` batches each); one reduced dict per loader."""
        state = self.state
        module = state.require_module()
        stage = self.stage
        limit_name = f"limit_{'val' if stage == 'validation' else stage}_batches"
        given = list(loaders)
        totals = [limited_batches(loader, limit, limit_name) for loader in loaders]
        fn = state.trainer_state.fn
        if limit != 0 and fn is not None and not state.sanity_checking:  # a limit of 0 loads none
            state.loaded_batches[fn] = totals
            say_empty_loaders(state, stage, loaders)
        if sum(totals) == 0:  # as Lightning: no loop at all, not even its start and end hooks
            return []
        strategy = state.strategy
        hooks = state.hooks
        step = state.profiler.wrap(f"{stage}_step", strategy.step_fn(module, f"{stage}_step"))
        step = without_batch_idx(module, f"{stage}_step", step)
        step_end_name = f"{stage}_step_end"
        step_end = (
            getattr(module, step_end_name)
            if overrides(module, TrainModule, step_end_name)
            else strategy.default_step_end()
        )
        end_hooks = hooks.bound(f"on_{stage}_batch_end")
        start_hooks = hooks.bound(f"on_{stage}_batch_start")
        previous_store = state.metrics.active
        store = state.metrics.new_store(stage)
        was_training = module.training
        getattr(module, f"on_{stage}_model_eval")()
        results: list[dict[str, torch.Tensor]] = []

        def log_step(loader_idx: int, several: bool) -> None:
            if store.step_values and not state.sanity_checking:
                state.metrics.log_eval_step(store, loader_idx, several)

        inference = state.inference_mode and state.trainer_state.fn is not TrainerFn.FITTING
        grad_off = torch.inference_mode() if inference else torch.no_grad()
        # known before the start hooks, so a progress bar shows the right total from the start
        state.num_eval_batches = int(totals[0]) if totals and totals[0] != math.inf else 0
        try:
            with grad_off:
                hooks.call(f"on_{stage}_start")
                if loaders != given:  # a start hook replaced them (BatchSizeFinder resized them)
                    totals = [limited_batches(loader, limit, limit_name) for loader in loaders]
                hooks.call(f"on_{stage}_epoch_start")
                for loader_idx, (loader, total) in enumerate(zip(loaders, totals)):
                    state.num_eval_batches = int(total) if total != math.inf else 0
                    # Lightning's hooks and steps get dataloader_idx only with several loaders
                    extra = (loader_idx,) if len(loaders) > 1 else ()
                    to_device = batch_transfer(strategy, module, state.given.datamodule, loader_idx)
                    calls = BatchCalls(
                        step,
                        start_hooks,
                        end_hooks,
                        seen=lambda batch, _: store.new_batch(batch),
                        stepped=step_end,
                        ended=functools.partial(log_step, loader_idx, len(loaders) > 1),
                    )
                    run_batches(state, calls, loader, total, to_device, extra)
                    # the last loader's Metric objects are reset after on_<stage>_epoch_end,
                    # as Lightning: that hook may read them (`self.val_acc.compute()`)
                    last = loader_idx == len(loaders) - 1
                    reduced = store.reduce_epoch(reset_metric_objects=not last)
                    if len(loaders) > 1:  # unless logged with add_dataloader_idx=False
                        suffix = f"/dataloader_idx_{loader_idx}"
                        named = {
                            (k + suffix if store.meta[k].add_dataloader_idx else k): k
                            for k in reduced
                        }
                        store.meta.update({new: store.meta[k] for new, k in named.items()})
                        reduced = {new: reduced[k] for new, k in named.items()}
                    results.append(reduced)
                store.default_on_step = False
                hooks.call(f"on_{stage}_epoch_end")
                tail = store.reduce_epoch()
                store.reset_computed_metrics()
                if results:
                    results[-1].update(tail)
                if not state.sanity_checking:
                    state.metrics.record_eval(store, results)
                hooks.call(f"on_{stage}_end")
        finally:
            state.metrics.active = previous_store
            if was_training:
                getattr(module, f"on_{stage}_model_train")()
        return results
