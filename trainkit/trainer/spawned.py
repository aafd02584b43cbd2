"""What a spawned rank 0 sends back to the caller, and how the caller takes it over."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from trainkit.datamodule import DataModule
from trainkit.module import TrainModule
from trainkit.state import RunState


def rank_result(state: RunState, output: object) -> dict[str, Any]:
    """The caller's share of a finished stage: weights, position, metrics, log folder, output."""
    return {
        "state_dict": {k: v.detach().cpu() for k, v in state.require_module().state_dict().items()},
        "position": state.position.state_dict(),
        "metrics": {
            k: v.detach().cpu() if hasattr(v, "detach") else v
            for k, v in state.metrics.epoch_metrics.items()
        },
        "log_dir": state.log_dir,
        "trainer_state": (
            state.trainer_state.fn,
            state.trainer_state.stage,
            state.trainer_state.status,
        ),
        "callbacks": {cb.state_key: cb.state_dict() for cb in state.given.callbacks},
        "output": output,
    }


def adopt_rank_result(
    state: RunState, result: dict[str, Any], model: TrainModule, datamodule: DataModule | None
) -> None:
    """Put rank 0's result into the caller's run state and ``model``."""
    model.load_state_dict(result["state_dict"])
    state.given = replace(state.given, module=model, datamodule=datamodule)
    state.position.epoch = result["position"]["epoch"]
    state.position.global_step = result["position"]["global_step"]
    state.position.batches_stepped = result["position"]["batches_stepped"]
    state.position.cut_short = result["position"].get("cut_short", False)
    state.metrics.epoch_metrics = result["metrics"]
    state.log_dir = result["log_dir"]
    trainer_state = state.trainer_state
    trainer_state.fn, trainer_state.stage, trainer_state.status = result["trainer_state"]
    for callback in state.given.callbacks:
        callback_state = result["callbacks"].get(callback.state_key)
        if callback_state:
            callback.load_state_dict(callback_state)
