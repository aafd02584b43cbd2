"""The run state as a specification: the loops, checkpoint dump/restore and preemption, driven
on a RunState built from real small parts (no Trainer), the way torchtitan tests its
checkpointer with fake containers."""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import math
import signal
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

from trainkit.callbacks.base import Callback
from trainkit.checkpoint import state as checkpoint_state
from trainkit.checkpoint.files import save_checkpoint
from trainkit.distributed.rank_board import RankBoard
from trainkit.errors import ConfigError, MisconfigurationError
from trainkit.loops.fit import FitLoop, val_every_n_batches
from trainkit.loops.hooks import HookDispatcher
from trainkit.loops.metric_hub import MetricHub
from trainkit.loops.preemption import Preemption, run_watching_stop_signals
from trainkit.loops.training_step import TrainingStep, extract_loss
from trainkit.module import TrainModule
from trainkit.profilers import build_profiler
from trainkit.seed import collect_rng_states
from trainkit.state import (
    LoopLimits,
    LoopPosition,
    ResumePoint,
    RunState,
    StageInputs,
    TrainerFn,
)
from trainkit.strategies.base import Placement, Strategy
from trainkit.strategies.precision import Precision

# ---- the fake run: real small parts, no Trainer ---------------------------------------------------


class Tiny(TrainModule):
    """Linear(4, 1), MSE, SGD; records what it trained on and after which batch it stepped."""

    def __init__(self, momentum: float = 0.0) -> None:
        super().__init__()
        self.layer = nn.Linear(4, 1)
        self.momentum = momentum
        self.seen: list[int] = []  # batch_idx of every training_step
        self.samples: list[int] = []  # dataset index of every sample trained on
        self.stepped_after: list[int] = []  # batch_idx of the batch each optimizer step ended

    def training_step(self, batch: Any, batch_idx: int) -> torch.Tensor:
        x, y, ids = batch
        self.seen.append(batch_idx)
        self.samples.extend(int(i) for i in ids)
        loss = F.mse_loss(self.layer(x), y)
        self.log("train_loss", loss, on_epoch=True)
        return loss

    def on_before_zero_grad(self, optimizer: torch.optim.Optimizer) -> None:
        self.stepped_after.append(self.seen[-1])

    def configure_optimizers(self) -> torch.optim.Optimizer:
        return torch.optim.SGD(self.parameters(), lr=0.1, momentum=self.momentum)


def make_loader(samples: int = 5, batch_size: int = 1) -> DataLoader:
    generator = torch.Generator().manual_seed(0)
    x = torch.randn(samples, 4, generator=generator)
    y = x.sum(1, keepdim=True)
    return DataLoader(TensorDataset(x, y, torch.arange(samples)), batch_size=batch_size)


def make_state(
    *,
    samples: int = 5,
    batch_size: int = 1,
    callbacks: tuple[Callback, ...] = (),
    seed: int = 0,
    momentum: float = 0.0,
    root: str = ".",
    **limits: Any,
) -> RunState:
    """A fit-stage RunState as the Trainer builds it (stage.new_run_state, setup_run, _fit)."""
    strategy = Strategy()
    strategy.connect(Placement())
    state = RunState(
        limits=LoopLimits(**limits),
        strategy=strategy,
        precision=Precision("32", "cpu"),
        hooks=None,
        metrics=None,
        profiler=build_profiler(None),
        board=RankBoard(),
        given=StageInputs(callbacks=list(callbacks)),
        default_root_dir=root,
    )
    owner = SimpleNamespace(run_state=state)  # what callbacks receive as ``trainer``
    state.hooks = HookDispatcher(owner, state)
    state.metrics = MetricHub(state)
    torch.manual_seed(seed)
    model = Tiny(momentum)
    model.trainer = owner
    state.trainer_state.fn = TrainerFn.FITTING
    state.position.fitting = True
    state.wrapped = strategy.setup_module(model)
    state.optimizers = [model.configure_optimizers()]
    state.given = dataclasses.replace(
        state.given, module=model, train_loader=make_loader(samples, batch_size)
    )
    state.stepper = TrainingStep(state)
    return state


def weights(module: nn.Module) -> dict[str, torch.Tensor]:
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


def assert_same(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> None:
    assert a.keys() == b.keys()
    for key in a:
        torch.testing.assert_close(a[key], b[key], rtol=0, atol=0)


class SaveAt(Callback):
    """Writes a checkpoint of ``state`` at the end of training batch ``batch_idx`` (or at the
    epoch end, with ``batch_idx=None``), keeping copies of what it holds."""

    def __init__(self, state: RunState, path: str, batch_idx: int | None) -> None:
        self.state, self.path, self.batch_idx = state, path, batch_idx
        self.checkpoint: dict[str, Any] | None = None
        self.weights: dict[str, torch.Tensor] = {}
        self.optimizer: dict[str, Any] = {}

    def _save(self) -> None:
        self.checkpoint = checkpoint_state.dump(self.state)
        save_checkpoint(self.checkpoint, self.path)
        self.weights = weights(self.state.given.module)
        self.optimizer = copy.deepcopy(self.state.optimizers[0].state_dict())

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx) -> None:
        if batch_idx == self.batch_idx:
            self._save()

    def on_train_epoch_end(self, trainer, module) -> None:
        if self.batch_idx is None:
            self._save()


# ---- 1. LoopPosition: what a checkpoint records, and where a resumed fit continues ---------------


def test_position_mid_epoch_resumes_in_the_same_epoch_skipping_the_batches_done():
    mid = LoopPosition(
        epoch=2,
        global_step=7,
        batches_stepped=7,
        batches_done=3,
        phase="batches",
        fitting=True,
        epoch_batches=5,
    )
    recorded = mid.state_dict()
    assert recorded == {
        "epoch": 2,
        "global_step": 7,
        "batches_stepped": 7,
        "batches_in_epoch": 3,
        "epoch_completed": False,
    }
    resumed = LoopPosition(batches_done=9, phase="batches")
    assert resumed.load_state_dict(recorded) == 3
    assert (resumed.epoch, resumed.global_step) == (2, 7)
    assert (resumed.batches_done, resumed.phase) == (0, None)


def test_position_at_a_complete_epoch_end_resumes_at_the_next_epoch_skipping_nothing():
    end = LoopPosition(
        epoch=2, global_step=10, batches_done=5, phase="end", fitting=True, epoch_batches=5
    )
    recorded = end.state_dict()
    assert recorded["epoch_completed"] is True
    assert recorded["batches_in_epoch"] == 5
    resumed = LoopPosition()
    assert resumed.load_state_dict(recorded) == 0
    assert (resumed.epoch, resumed.global_step) == (3, 10)


def test_position_of_an_epoch_cut_short_is_not_complete():
    cut = LoopPosition(
        epoch=2, global_step=4, batches_done=2, phase="end", fitting=True, epoch_batches=5
    )
    recorded = cut.state_dict()
    assert recorded["epoch_completed"] is False
    assert recorded["batches_in_epoch"] == 2
    resumed = LoopPosition()
    assert resumed.load_state_dict(recorded) == 2
    assert resumed.epoch == 2


def test_position_between_fit_epochs_records_no_partial_epoch():
    between = LoopPosition(epoch=1, global_step=5, batches_done=5, phase=None, fitting=True)
    recorded = between.state_dict()
    assert recorded["batches_in_epoch"] == 0
    assert recorded["epoch_completed"] is False
    resumed = LoopPosition()
    assert resumed.load_state_dict(recorded) == 0
    assert resumed.epoch == 1


def test_position_outside_fit_counts_as_complete():
    outside = LoopPosition(
        epoch=2, global_step=7, batches_done=3, phase="batches", fitting=False, epoch_batches=5
    )
    recorded = outside.state_dict()
    assert recorded["epoch_completed"] is True
    assert recorded["batches_in_epoch"] == 0
    resumed = LoopPosition()
    assert resumed.load_state_dict(recorded) == 0
    assert resumed.epoch == 3


# ---- 2-4. FitLoop.run_epoch ----------------------------------------------------------------------


def test_run_epoch_steps_at_every_accumulation_boundary_and_the_last_batch():
    state = make_state(accumulate_grad_batches=2)
    FitLoop(state).run_epoch()
    model = state.given.module
    assert model.seen == [0, 1, 2, 3, 4]
    assert model.stepped_after == [1, 3, 4]
    assert state.position.global_step == 3
    assert state.position.batches_done == 5
    assert state.position.batches_seen == 5
    assert state.position.epoch == 1
    assert state.position.phase is None


def test_accumulated_gradients_are_averaged_like_one_bigger_batch():
    accumulated = make_state(samples=4, batch_size=1, accumulate_grad_batches=2)
    batched = make_state(samples=4, batch_size=2)
    assert_same(weights(accumulated.given.module), weights(batched.given.module))
    FitLoop(accumulated).run_epoch()
    FitLoop(batched).run_epoch()
    assert accumulated.position.global_step == batched.position.global_step == 2
    after_accumulated, after_batched = (
        weights(accumulated.given.module),
        weights(batched.given.module),
    )
    for key in after_batched:
        torch.testing.assert_close(after_accumulated[key], after_batched[key])


def test_run_epoch_stops_at_max_steps_and_does_not_count_the_epoch():
    state = make_state(max_steps=2)
    FitLoop(state).run_epoch()
    assert state.given.module.seen == [0, 1]
    assert state.position.global_step == 2
    assert state.position.batches_done == 2
    assert state.position.epoch == 0
    assert state.fit_done


def test_run_epoch_stopped_by_a_callback_still_counts_the_epoch():
    class StopAfterTwo(Callback):
        def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx) -> None:
            if batch_idx == 1:
                trainer.run_state.stop.should_stop = True

    state = make_state(callbacks=(StopAfterTwo(),))
    FitLoop(state).run_epoch()
    assert state.given.module.seen == [0, 1]
    assert state.position.epoch == 1
    assert state.fit_done


def test_run_epoch_skips_the_batches_a_resume_point_already_trained_on():
    state = make_state()
    state.stop.resume = ResumePoint(rng=[None], epoch_rng=[None], skip=2)
    FitLoop(state).run_epoch()
    assert state.given.module.seen == [2, 3, 4]
    assert state.given.module.samples == [2, 3, 4]
    assert state.position.global_step == 3
    assert state.position.batches_done == 5
    assert state.position.epoch == 1
    assert state.stop.resume is None


def test_fit_loop_runs_epochs_until_max_epochs_then_ends_the_fit():
    calls: list[str] = []

    class Order(Callback):
        def on_train_epoch_start(self, trainer, module) -> None:
            calls.append("epoch_start")

        def on_train_end(self, trainer, module) -> None:
            calls.append("train_end")

        def on_fit_end(self, trainer, module) -> None:
            calls.append("fit_end")

    state = make_state(max_epochs=2, callbacks=(Order(),))
    FitLoop(state).run()
    assert state.given.module.seen == [0, 1, 2, 3, 4] * 2
    assert (state.position.epoch, state.position.global_step) == (2, 10)
    assert calls == ["epoch_start", "epoch_start", "train_end", "fit_end"]


def test_extract_loss_takes_a_tensor_a_dict_with_loss_or_none():
    loss = torch.tensor(1.5)
    assert extract_loss(loss) is loss
    assert extract_loss({"loss": loss, "other": 1}) is loss
    assert extract_loss(None) is None
    with pytest.raises(TypeError, match="training_step returned"):
        extract_loss([loss])


# ---- 5. val_every_n_batches ----------------------------------------------------------------------


def with_val(state: RunState, epoch_batches: int | float = 10, **limits: Any) -> RunState:
    state.limits = dataclasses.replace(state.limits, **limits)
    state.given = dataclasses.replace(state.given, val_loaders=[make_loader()])
    state.position.epoch_batches = epoch_batches
    return state


def test_val_every_n_batches_an_int_interval_is_a_batch_count():
    assert val_every_n_batches(with_val(make_state(), val_check_interval=3)) == 3


def test_val_every_n_batches_a_float_interval_is_a_fraction_of_the_epoch():
    assert val_every_n_batches(with_val(make_state(), val_check_interval=0.25)) == 2
    assert val_every_n_batches(with_val(make_state(), val_check_interval=1.0)) == 10
    assert val_every_n_batches(with_val(make_state(), val_check_interval=0.01)) == 1


def test_val_every_n_batches_is_zero_without_val_loaders():
    state = with_val(make_state(), val_check_interval=3)
    state.given = dataclasses.replace(state.given, val_loaders=[])
    assert val_every_n_batches(state) == 0


def test_val_every_n_batches_skips_epochs_per_check_val_every_n_epoch():
    state = with_val(make_state(), check_val_every_n_epoch=2)
    state.position.epoch = 0
    assert val_every_n_batches(state) == 0
    state.position.epoch = 1
    assert val_every_n_batches(state) == 10
    state.position.epoch = 2
    assert val_every_n_batches(state) == 0


def test_val_every_n_batches_rejects_an_int_interval_longer_than_the_epoch():
    state = with_val(make_state(), val_check_interval=11)
    with pytest.raises(ConfigError, match="val_check_interval"):
        val_every_n_batches(state)


def test_val_every_n_batches_rejects_a_fraction_of_an_unsized_epoch():
    state = with_val(make_state(), epoch_batches=math.inf, val_check_interval=0.5)
    with pytest.raises(MisconfigurationError, match="sized train loader"):
        val_every_n_batches(state)


# ---- 6. checkpoint dump -> restore ---------------------------------------------------------------


def test_dump_mid_epoch_records_the_batches_done_and_an_incomplete_epoch(tmp_path):
    state = make_state()
    saver = SaveAt(state, str(tmp_path / "mid.ckpt"), batch_idx=2)
    state.given.callbacks.append(saver)
    FitLoop(state).run_epoch()
    checkpoint = saver.checkpoint
    assert checkpoint is not None
    assert checkpoint["loops"] == {
        "epoch": 0,
        "batches_stepped": 3,
        "batches_in_epoch": 3,
        "epoch_completed": False,
    }
    assert checkpoint["global_step"] == 3
    assert checkpoint["epoch"] == 0
    assert "epoch_metrics_so_far" in checkpoint
    assert len(checkpoint["rng_states"]) == len(checkpoint["epoch_start_rng_states"]) == 1


def test_restore_puts_weights_optimizer_position_and_resume_point_into_a_fresh_state(tmp_path):
    path = str(tmp_path / "mid.ckpt")
    trained = make_state(momentum=0.9)
    saver = SaveAt(trained, path, batch_idx=2)
    trained.given.callbacks.append(saver)
    FitLoop(trained).run_epoch()

    fresh = make_state(momentum=0.9, seed=1)
    with pytest.raises(AssertionError):
        assert_same(weights(fresh.given.module), saver.weights)
    checkpoint_state.restore(fresh, path, full=True)

    assert_same(weights(fresh.given.module), saver.weights)
    restored = fresh.optimizers[0].state_dict()
    assert restored["state"].keys() == saver.optimizer["state"].keys() != set()
    for index, buffers in saver.optimizer["state"].items():
        torch.testing.assert_close(
            restored["state"][index]["momentum_buffer"], buffers["momentum_buffer"]
        )
    assert (fresh.position.epoch, fresh.position.global_step) == (0, 3)
    resume = fresh.stop.resume
    assert resume is not None
    assert resume.skip == 3
    assert len(resume.rng) == 1 and resume.rng[0] is not None
    assert resume.epoch_metrics is not None


def test_a_fit_resumed_mid_epoch_ends_where_an_uninterrupted_one_does(tmp_path):
    path = str(tmp_path / "mid.ckpt")
    uninterrupted = make_state(momentum=0.9)
    uninterrupted.given.callbacks.append(SaveAt(uninterrupted, path, batch_idx=2))
    FitLoop(uninterrupted).run_epoch()

    resumed = make_state(momentum=0.9, seed=1)
    checkpoint_state.restore(resumed, path, full=True)
    FitLoop(resumed).run_epoch()

    assert resumed.given.module.seen == [3, 4]
    assert resumed.stop.resume is None
    assert (resumed.position.epoch, resumed.position.global_step) == (1, 5)
    assert_same(weights(resumed.given.module), weights(uninterrupted.given.module))
    expected = uninterrupted.metrics.epoch_metrics
    assert expected
    for key, value in expected.items():
        torch.testing.assert_close(resumed.metrics.epoch_metrics[key], value)


def test_a_checkpoint_at_a_complete_epoch_end_resumes_at_the_next_epoch(tmp_path):
    path = str(tmp_path / "end.ckpt")
    state = make_state()
    saver = SaveAt(state, path, batch_idx=None)
    state.given.callbacks.append(saver)
    FitLoop(state).run_epoch()
    assert saver.checkpoint is not None
    assert saver.checkpoint["loops"] == {
        "epoch": 0,
        "batches_stepped": 5,
        "batches_in_epoch": 5,
        "epoch_completed": True,
    }
    assert "epoch_metrics_so_far" not in saver.checkpoint

    fresh = make_state(seed=1)
    checkpoint_state.restore(fresh, path, full=True)
    assert (fresh.position.epoch, fresh.position.global_step) == (1, 5)
    assert fresh.stop.resume is not None
    assert fresh.stop.resume.skip == 0
    assert fresh.stop.resume.epoch_metrics is None
    assert checkpoint_state.batches_to_skip(fresh) == 0


def test_a_checkpoint_at_the_end_of_an_epoch_cut_by_max_steps_resumes_that_epoch(tmp_path):
    path = str(tmp_path / "cut.ckpt")
    state = make_state(max_steps=2)
    saver = SaveAt(state, path, batch_idx=None)
    state.given.callbacks.append(saver)
    FitLoop(state).run_epoch()
    assert saver.checkpoint is not None
    assert saver.checkpoint["loops"] == {
        "epoch": 0,
        "batches_stepped": 2,
        "batches_in_epoch": 2,
        "epoch_completed": False,
    }
    fresh = make_state(seed=1)
    checkpoint_state.restore(fresh, path, full=True)
    assert fresh.position.epoch == 0
    assert checkpoint_state.batches_to_skip(fresh) == 2


def test_restore_rng_replays_the_epoch_start_then_the_checkpoint_state():
    state = make_state()
    torch.manual_seed(11)
    at_epoch_start = collect_rng_states()
    torch.manual_seed(22)
    at_checkpoint = collect_rng_states()
    state.stop.resume = ResumePoint(rng=[at_checkpoint], epoch_rng=[at_epoch_start], skip=2)

    torch.manual_seed(99)
    checkpoint_state.restore_rng(state)  # before the resumed epoch: reshuffle as it did
    torch.testing.assert_close(torch.get_rng_state(), at_epoch_start["torch"])
    assert state.stop.resume is not None

    checkpoint_state.restore_rng(state, after_skip=True)  # after skipping: where it was saved
    torch.testing.assert_close(torch.get_rng_state(), at_checkpoint["torch"])
    assert state.stop.resume is None


# ---- 7. HookDispatcher ---------------------------------------------------------------------------


class Recorder(Callback):
    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx) -> None:
        self.calls.append(("on_train_batch_end", (trainer, module, outputs, batch, batch_idx)))

    def on_save_checkpoint(self, trainer, module, checkpoint) -> None:
        self.calls.append(("on_save_checkpoint", (trainer, module, checkpoint)))


def test_hooks_bind_only_the_callbacks_that_override_a_hook():
    recorder, plain = Recorder(), Callback()
    state = make_state(callbacks=(plain, recorder))
    owner = state.hooks.trainer
    bound = state.hooks.bound("on_train_batch_end")
    assert len(bound) == 1
    bound[0]("out", "batch", 7)
    assert recorder.calls == [
        ("on_train_batch_end", (owner, state.given.module, "out", "batch", 7)),
    ]
    assert state.hooks.bound("on_validation_end") == []


def test_hooks_bind_the_module_after_the_callbacks():
    order: list[str] = []

    class BeforeZeroGrad(Callback):
        def on_before_zero_grad(self, trainer, module, optimizer) -> None:
            order.append("callback")

    state = make_state(callbacks=(BeforeZeroGrad(),))
    state.given.module.stepped_after.clear()
    state.given.module.seen.append(0)
    hooks = state.hooks.bound("on_before_zero_grad")
    assert len(hooks) == 2
    for hook in hooks:
        hook(state.optimizers[0])
    assert order == ["callback"]
    assert state.given.module.stepped_after == [0]
    assert hooks[-1] == state.given.module.on_before_zero_grad


def test_call_callbacks_calls_every_callback_with_owner_and_module():
    first, second, plain = Recorder(), Recorder(), Callback()
    state = make_state(callbacks=(first, plain, second))
    owner = state.hooks.trainer
    checkpoint: dict[str, Any] = {}
    state.hooks.call_callbacks("on_save_checkpoint", checkpoint)
    for recorder in (first, second):
        assert recorder.calls == [("on_save_checkpoint", (owner, state.given.module, checkpoint))]
    state.hooks.call_callbacks("on_save_checkpoint", checkpoint, only=[second])
    assert len(first.calls) == 1
    assert len(second.calls) == 2


# ---- 8. Preemption -------------------------------------------------------------------------------


def test_preemption_waits_for_an_optimizer_step_boundary_then_saves_and_stops(capsys):
    state = make_state()
    saved: list[str] = []
    previous = signal.getsignal(signal.SIGTERM)
    preemption = Preemption(state, saved.append, "/nowhere/preempted.ckpt")
    try:
        assert preemption.should_stop(True) is False  # no signal yet
        preemption.signals.received = signal.SIGTERM
        assert preemption.should_stop(can_stop=False) is False  # mid-accumulation
        assert preemption.should_stop(True) is True
        assert not state.fit_done
        preemption.save_and_stop()
        assert saved == ["/nowhere/preempted.ckpt"]
        assert state.stop.preempted == "SIGTERM"
        assert state.fit_done
    finally:
        preemption.close()
    assert signal.getsignal(signal.SIGTERM) is previous
    assert "preempted (SIGTERM)" in capsys.readouterr().err


def test_a_preempted_epoch_saves_at_the_next_boundary_and_does_not_end(tmp_path):
    state = make_state(accumulate_grad_batches=2)
    saved: list[dict[str, Any]] = []
    preemption = state.preemption = Preemption(
        state, lambda path: saved.append(checkpoint_state.dump(state)), str(tmp_path / "p.ckpt")
    )
    ended: list[str] = []

    class EpochEnd(Callback):
        def on_train_epoch_end(self, trainer, module) -> None:
            ended.append("epoch_end")

    state.given.callbacks.append(EpochEnd())
    try:
        preemption.signals.received = signal.SIGTERM
        FitLoop(state).run_epoch()
    finally:
        preemption.close()
        state.preemption = None
    assert state.given.module.seen == [0, 1]  # batch 0 was mid-accumulation
    assert state.position.global_step == 1
    assert state.position.epoch == 0
    assert ended == []
    assert len(saved) == 1
    assert saved[0]["loops"] == {
        "epoch": 0,
        "batches_stepped": 1,  # batch 1 ended the accumulation window
        "batches_in_epoch": 2,
        "epoch_completed": False,
    }
    assert state.fit_done


def test_run_watching_stop_signals_restores_handlers_and_clears_the_preemption():
    state = make_state()
    previous = signal.getsignal(signal.SIGTERM)
    seen: list[Any] = []

    def run() -> None:
        seen.append(state.preemption)
        assert signal.getsignal(signal.SIGTERM) is not previous
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        run_watching_stop_signals(state, run, lambda path: None, "unused.ckpt")
    assert isinstance(seen[0], Preemption)
    assert state.preemption is None
    assert signal.getsignal(signal.SIGTERM) is previous


# ---- 9. RunState.fit_done / is_final_epoch -------------------------------------------------------


def test_fit_is_done_at_max_epochs_and_the_epoch_before_is_final():
    state = make_state(max_epochs=2)
    state.position.epoch = 0
    assert not state.fit_done and not state.is_final_epoch
    state.position.epoch = 1
    assert not state.fit_done and state.is_final_epoch
    state.position.epoch = 2
    assert state.fit_done


def test_fit_is_done_at_max_steps_whatever_the_epoch():
    state = make_state(max_epochs=100, max_steps=4)
    state.position.global_step = 3
    assert not state.fit_done and not state.is_final_epoch
    state.position.global_step = 4
    assert state.fit_done and state.is_final_epoch


def test_max_steps_minus_one_and_infinite_max_epochs_never_end_a_fit():
    state = make_state(max_epochs=math.inf, max_steps=-1)
    state.position.epoch, state.position.global_step = 10**6, 10**9
    assert not state.fit_done and not state.is_final_epoch


def test_should_stop_ends_the_fit_only_once_min_epochs_ran():
    state = make_state(max_epochs=10, min_epochs=3)
    state.stop.should_stop = True
    state.position.epoch = 1
    assert not state.fit_done and not state.is_final_epoch
    state.position.epoch = 2
    assert not state.fit_done and state.is_final_epoch
    state.position.epoch = 3
    assert state.fit_done


def test_a_preempted_fit_is_done():
    state = make_state()
    assert not state.fit_done
    state.stop.preempted = "SIGUSR1"
    assert state.fit_done


class SyncRecorder(Strategy):
    """A one-process strategy that says it has a process group, to watch the sync context."""

    is_distributed = True

    def __init__(self) -> None:
        super().__init__()
        self.sync_on = True

    @contextlib.contextmanager
    def _held(self):
        self.sync_on = False
        try:
            yield
        finally:
            self.sync_on = True

    def no_backward_sync(self, wrapped: nn.Module) -> contextlib.AbstractContextManager:
        return self._held()


def test_a_training_step_that_raises_leaves_gradient_sync_on():
    """Accumulating under a process group holds the all-reduce back; an error inside the step
    must not leave it held for the steps after it (e.g. a caught OOM retried smaller)."""
    state = make_state(accumulate_grad_batches=2)
    recorder = SyncRecorder()
    recorder.connect(Placement())
    state.strategy = recorder
    state.stepper = TrainingStep(state)

    def failing_step(batch, batch_idx):
        assert recorder.sync_on is False  # held: not the accumulation boundary
        raise RuntimeError("out of memory")

    state.stepper.forward = failing_step
    batch = next(iter(state.given.train_loader))
    with pytest.raises(RuntimeError, match="out of memory"):
        state.stepper.run(batch, 0, boundary=False)
    assert recorder.sync_on is True


def test_the_boundary_batch_steps_the_optimizer_with_sync_as_usual():
    state = make_state(accumulate_grad_batches=2)
    before = weights(state.given.module)
    batches = iter(state.given.train_loader)
    state.stepper.run(next(batches), 0, boundary=False)
    assert_same(weights(state.given.module), before)  # gradients accumulate, nothing stepped
    state.stepper.run(next(batches), 1, boundary=True)
    assert weights(state.given.module)["layer.weight"].ne(before["layer.weight"]).any()
