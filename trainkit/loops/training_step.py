"""One training batch, top-down: the forward under autocast, the loss, the backward with the
gradient sync held back until the accumulation boundary, then at the boundary the optimizer
step (sync, unscale, clip, step, zero the gradients, per-step schedulers)."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

import torch

from trainkit.common.hooks import overrides
from trainkit.distributed import rank_board
from trainkit.loops.manual_optimizer import ManualOptimizer
from trainkit.module import TrainModule, without_batch_idx
from trainkit.state import RunState
from trainkit.strategies.precision import Precision

SYNC_AS_USUAL = contextlib.nullcontext()


def extract_loss(output: object) -> torch.Tensor | None:
    """The loss from what training_step returned: a tensor, a dict with ``loss``, or None."""
    if output is None or isinstance(output, torch.Tensor):
        return output
    if isinstance(output, dict) and "loss" in output:
        return output["loss"]
    raise TypeError(
        f"training_step returned {type(output).__name__}; expected a loss tensor, a dict with "
        "'loss', or None to skip the batch"
    )


def batch_end_outputs(output: Any, normalize: int) -> Any:
    """What ``on_train_batch_end`` receives as ``outputs``, as in Lightning: a dict with the
    step's loss detached (divided by ``normalize``, the batches accumulated under automatic
    optimization) and its other keys; ``{}`` for a step that returned None. (A manual step's
    other return values, which Lightning refuses, are passed on as they are.)"""
    if output is None:
        return {}
    if isinstance(output, torch.Tensor):
        loss = output.detach()
        return {"loss": loss / normalize if normalize > 1 else loss}
    if not isinstance(output, Mapping):
        return output
    outputs = dict(output)
    if isinstance(outputs.get("loss"), torch.Tensor):
        loss = outputs["loss"].detach()
        outputs["loss"] = loss / normalize if normalize > 1 else loss
    return outputs


class TrainingStep:
    """Built once per fit, after the optimizers: everything a step needs, looked up once."""

    def __init__(self, state: RunState) -> None:
        self.state = state
        module, strategy = state.require_module(), state.strategy
        wrapped = state.require_wrapped()
        step_fn = state.profiler.wrap("training_step", strategy.training_step_fn(wrapped, module))
        self._step_fn = without_batch_idx(module, "training_step", step_fn)
        # a user's module may define training_step_end (TrainModule itself does not)
        self._step_end = overridden(module, "training_step_end") or strategy.default_step_end()
        self._autocast = state.precision.autocast
        # the module's training_step, under autocast for mixed precision (a manually optimized
        # module runs its own backward and steps inside it)
        self.forward: Callable[[Any, int], Any] = (
            self._forward_autocast if state.precision.is_mixed else self._step_fn
        )
        self._said_no_loss = False
        self._check_finite = state.nonfinite_loss != "ignore"
        self._distributed = strategy.is_distributed
        self.set_accumulation(state.limits.accumulate_grad_batches)
        self._no_sync = strategy.no_backward_sync
        self._wrapped = wrapped
        hooks = state.hooks
        self._before_backward = hooks.bound("on_before_backward")
        self._after_backward = hooks.bound("on_after_backward")
        self._before_optimizer_step = hooks.bound("on_before_optimizer_step")
        self._before_zero_grad = hooks.bound("on_before_zero_grad")
        self._step_schedulers = [  # those that read a metric step after validation (loops/fit.py)
            c for c in state.lr_scheduler_configs if c.interval == "step" and not c.needs_metric
        ]
        clip_value = state.limits.gradient_clip_val
        # the module's configure_gradient_clipping (by default clip_gradients with the Trainer's
        # settings) runs when the Trainer clips or the module overrides it
        self._clip = (clip_value is not None and clip_value > 0) or overrides(
            module, TrainModule, "configure_gradient_clipping"
        )
        self._clip_fn = module.configure_gradient_clipping
        self._scheduler_step = module.lr_scheduler_step
        self._params: list[torch.Tensor] = [p for p in module.parameters() if p.requires_grad]
        self._sync_gradients = strategy.gradient_sync_fn()
        self._set_to_none = strategy.zero_grad_set_to_none
        self._strategy_backward = strategy.backward_fn()
        manual = not module.automatic_optimization
        self._manual_sync = strategy.manual_gradient_sync_fn(wrapped, module)
        # the module's own versions of the steps, only where it overrides them
        self._user_backward = overridden(module, "backward")
        self._user_step = overridden(module, "optimizer_step")
        self._user_zero_grad = overridden(module, "optimizer_zero_grad")
        self._loss: torch.Tensor | None = None
        self._plain_backward = self._user_backward is None and self._user_step is None
        self._all_params: list[torch.Tensor] = list(module.parameters()) if manual else []
        # what a manually optimized module's self.optimizers() returns: each step counts
        self.manual_optimizers = [
            ManualOptimizer(optimizer, state.precision, state.position, self._before_optimizer_step)
            for optimizer in (state.optimizers if manual else ())
        ]
        self._strategy_step = strategy.optimizer_step_fn()
        self._mark = state.board.mark

    def set_accumulation(self, batches: int) -> None:
        """Accumulate the gradients of ``batches`` batches per optimizer step (set per epoch:
        GradientAccumulationScheduler changes it)."""
        self._accumulate = batches
        # accumulating under a process group: no gradient all-reduce until the boundary
        self._holds_sync = self._distributed and batches > 1

    def run(self, batch: object, batch_idx: int, boundary: bool) -> Any:
        """One batch under automatic optimization; ``boundary``: the last batch of an
        accumulation window, after which the optimizer steps. Returns the step's output."""
        holding = self._holds_sync and not boundary
        with self._no_sync(self._wrapped) if holding else SYNC_AS_USUAL:
            output = self.forward(batch, batch_idx)
            if self._step_end is not None:
                output = self._step_end(output)
            loss = extract_loss(output)
            if loss is not None:
                if self._check_finite and not loss.isfinite():
                    self._say_not_finite(loss, batch_idx)
                self.backward(loss / self._accumulate if self._accumulate > 1 else loss)
            elif not self._said_no_loss:
                self._say_no_loss(batch_idx)
        if boundary:
            self.optimizer_step()
        return output

    def _say_no_loss(self, batch_idx: int) -> None:
        """A step that returned no loss trains nothing on its batch: said once per fit (rank 0),
        at the first batch it happens, since a forgotten ``return loss`` looks like this."""
        self._said_no_loss = True
        if self.state.strategy.is_global_zero:
            position = self.state.position
            print(
                f"trainkit: training_step returned None at epoch {position.epoch}, batch "
                f"{batch_idx}: that batch trains nothing (automatic optimization); return the "
                "loss, or a dict with 'loss' (returning None on purpose skips a batch; said once)",
                file=sys.stderr,
                flush=True,
            )

    def _say_not_finite(self, loss: torch.Tensor, batch_idx: int) -> None:
        """A NaN/inf loss, where it appeared: stops the fit before the batch's backward (the
        weights and every checkpoint stay finite) or, with ``nonfinite_loss: warn``, is said
        once and training goes on."""
        from trainkit.errors import NonFiniteLossError

        state = self.state
        position = state.position
        where = (
            f"rank {state.strategy.global_rank}: the loss returned by training_step is "
            f"{loss.item()} at epoch {position.epoch}, batch {batch_idx} (global step "
            f"{position.global_step})"
        )
        if state.nonfinite_loss == "stop":
            raise NonFiniteLossError(
                f"{where}; the fit stopped before this batch changed the weights, so they and "
                "the checkpoints stay finite; find the cause (learning rate, data, a log of 0) or "
                "set trainer.nonfinite_loss: warn to train on"
            )
        self._check_finite = False  # warn: said once per fit
        print(
            f"trainkit: {where}; training goes on (nonfinite_loss: warn)",
            file=sys.stderr,
            flush=True,
        )

    def _forward_autocast(self, batch: object, batch_idx: int) -> Any:
        with self._autocast():
            return self._step_fn(batch, batch_idx)

    def backward(self, loss: torch.Tensor, *args: Any, **kwargs: Any) -> None:
        """Backward through the hooks, the precision's loss scale and the strategy (also
        ``manual_backward``'s, whose other arguments go to ``backward``: ``retain_graph``...)."""
        self._mark(rank_board.BACKWARD)
        for hook in self._before_backward:
            hook(loss)
        if self._strategy_backward is not None:
            self._strategy_backward(loss, *args, **kwargs)
        elif self._plain_backward:
            self.state.precision.backward(loss, *args, **kwargs)
        else:
            self._custom_backward(loss, *args, **kwargs)
        if self._manual_sync is not None:
            self._manual_sync(self._all_params)
        for hook in self._after_backward:
            hook()

    def optimizer_step(self) -> None:
        """Sync, unscale, clip, step and zero the (single) optimizer; step per-step schedulers."""
        self._mark(rank_board.OPTIMIZER_STEP)
        state = self.state
        optimizer = state.optimizers[0]
        precision = state.precision
        if self._sync_gradients is not None:
            self._sync_gradients(self._params)
        if self._clip or self._before_optimizer_step:
            precision.unscale(optimizer)
        for hook in self._before_optimizer_step:
            hook(optimizer)
        if self._clip:  # the optimizer's parameters now (finetuning may have added groups)
            limits = state.limits  # by keyword, as Lightning calls it
            self._clip_fn(
                optimizer,
                gradient_clip_val=limits.gradient_clip_val,
                gradient_clip_algorithm=limits.gradient_clip_algorithm,
            )
        if self._strategy_step is not None:
            for hook in self._before_zero_grad:
                hook(optimizer)
            self._strategy_step()
        else:
            if self._user_step is None:
                precision.step(optimizer)
                precision.update()
            else:
                stepping = PrecisionOptimizer(optimizer, precision)
                self._user_step(*self._where(), stepping, self._closure)
            for hook in self._before_zero_grad:
                hook(optimizer)
            if self._user_zero_grad is None and self._set_to_none:
                optimizer.zero_grad()  # torch's default (horovod's optimizer takes no argument)
            elif self._user_zero_grad is None:
                optimizer.zero_grad(set_to_none=False)
            else:
                self._user_zero_grad(*self._where(), optimizer)
        for config in self._step_schedulers:
            # as Lightning: the frequency counts the epoch's batches (this one: batches_done)
            if (state.position.batches_done + 1) % config.frequency == 0:
                self._scheduler_step(config.scheduler, None)

    def _custom_backward(self, loss: torch.Tensor, *args: Any, **kwargs: Any) -> None:
        """Backward for a module that overrides ``backward`` or ``optimizer_step``."""
        self._loss = loss
        if self._user_backward is None:
            self.state.precision.backward(loss, *args, **kwargs)
        else:
            self._user_backward(self.state.precision.scale(loss), *args, **kwargs)

    def _where(self) -> tuple[int, int]:
        """(epoch, batch_idx) of the step, as a module's optimizer_step override receives."""
        position = self.state.position
        return position.epoch, position.batches_done

    def _closure(self) -> torch.Tensor | None:
        """The closure an optimizer_step override hands to optimizer.step: the step's forward
        and backward already ran, so it returns the loss."""
        return self._loss


def overridden(module: TrainModule, name: str) -> Any:
    """``module``'s method ``name`` if its class overrides TrainModule's, else None."""
    return getattr(module, name) if overrides(module, TrainModule, name) else None


class PrecisionOptimizer:
    """The optimizer an ``optimizer_step`` override steps: ``step`` goes through the precision
    plugin (the fp16 scaler); everything else is the optimizer's."""

    def __init__(self, optimizer: torch.optim.Optimizer, precision: Precision) -> None:
        self.optimizer = optimizer
        self.precision = precision

    def step(self, closure: Callable[[], object] | None = None) -> Any:
        if closure is not None:
            closure()
        result = self.precision.step(self.optimizer)
        self.precision.update()
        return result

    def __getattr__(self, name: str) -> Any:
        return getattr(self.optimizer, name)
