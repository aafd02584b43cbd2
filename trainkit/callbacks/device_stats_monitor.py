"""DeviceStatsMonitor: the device's statistics (CUDA memory, or CPU and RAM use) sent to the
loggers around each training batch, at the logging interval."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from trainkit.callbacks.base import Callback
from trainkit.errors import MisconfigurationError

if TYPE_CHECKING:
    from trainkit.common.types import STEP_OUTPUT
    from trainkit.module import TrainModule
    from trainkit.trainer.trainer import Trainer


class DeviceStatsMonitor(Callback):
    """Log ``DeviceStatsMonitor.on_train_batch_start/<stat>`` and ``.../on_train_batch_end/<stat>``
    every ``log_every_n_steps``."""

    def __init__(self, cpu_stats: bool | None = None) -> None:
        """
        Args:
            cpu_stats: Also log CPU and RAM use (needs psutil); None: on CPU runs only;
                False: never on CPU.
        """
        self._cpu_stats = cpu_stats

    def setup(self, trainer: Trainer, pl_module: TrainModule, stage: str) -> None:
        if stage != "fit":
            return
        if not trainer.loggers:
            raise MisconfigurationError(
                "DeviceStatsMonitor needs a logger: Trainer(logger=True) or a logger object"
            )
        if self._cpu_stats:
            import importlib.util

            if importlib.util.find_spec("psutil") is None:
                raise ModuleNotFoundError(
                    "DeviceStatsMonitor(cpu_stats=True) needs psutil: pip install psutil"
                )

    def _log(self, trainer: Trainer, key: str) -> None:
        if trainer.global_step % trainer.log_every_n_steps:
            return
        from trainkit.accelerators import CPUAccelerator, CUDAAccelerator

        device = trainer.strategy.root_device
        if device.type == "cpu" and self._cpu_stats is False:
            return
        stats: dict[str, Any] = (
            CPUAccelerator().get_device_stats(device)
            if device.type == "cpu"
            else CUDAAccelerator().get_device_stats(device)
        )
        if self._cpu_stats and device.type != "cpu":
            stats.update(CPUAccelerator().get_device_stats("cpu"))
        prefix = f"{type(self).__qualname__}.{key}"
        numbers = {f"{prefix}/{name}": float(value) for name, value in stats.items()}
        trainer.log_to_loggers(numbers, trainer.global_step)

    def on_train_batch_start(
        self, trainer: Trainer, pl_module: TrainModule, batch: Any, batch_idx: int
    ) -> None:
        self._log(trainer, "on_train_batch_start")

    def on_train_batch_end(
        self,
        trainer: Trainer,
        pl_module: TrainModule,
        outputs: STEP_OUTPUT,
        batch: Any,
        batch_idx: int,
    ) -> None:
        self._log(trainer, "on_train_batch_end")
