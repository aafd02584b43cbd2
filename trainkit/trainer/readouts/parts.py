"""The parts a stage drives, as Lightning names them: the module and data module, the
optimizers and schedulers, precision, profiler, strategy and the latest predict's loop."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

import torch

from trainkit.module import TrainModule
from trainkit.state import RunState
from trainkit.trainer.readouts.readout import Readout

if TYPE_CHECKING:
    from trainkit.loops.predict import PredictLoop


class PartReadouts:
    """What runs: module, optimizers, precision, profiler, strategy (Lightning's names)."""

    run_state: RunState

    # None before a stage attached a module; typed as Lightning types it, for the callbacks
    lightning_module = Readout(lambda t: cast("TrainModule", t.run_state.given.module))
    model = Readout(lambda t: t.run_state.given.module)
    datamodule = Readout(lambda t: t.run_state.given.datamodule)
    lr_scheduler_configs = Readout(lambda t: t.run_state.lr_scheduler_configs)
    predict_loop = Readout(
        lambda t: cast("PredictLoop", t.run_state.predict_loop),
        "The latest predict's loop: ``predictions``, ``epoch_batch_indices``, "
        "``current_batch_indices`` (None before a predict; typed as the hooks that read it see "
        "it, during a predict).",
    )
    precision_plugin = Readout(lambda t: t.run_state.precision)
    scaler = Readout(
        lambda t: t.run_state.precision.scaler,
        "The gradient scaler of 16-mixed precision (None otherwise).",
    )
    profiler = Readout(lambda t: t.run_state.profiler)
    strategy = Readout(
        lambda t: t.run_state.strategy, "The strategy this run uses (owned by the run state)."
    )

    @property
    def optimizers(self) -> list[torch.optim.Optimizer]:
        return self.run_state.optimizers

    @optimizers.setter
    def optimizers(self, optimizers: list[torch.optim.Optimizer]) -> None:
        self.run_state.optimizers = list(optimizers)
