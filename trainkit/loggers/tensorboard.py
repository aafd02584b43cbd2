"""TensorBoardLogger: event files readable by ``tensorboard`` and its EventAccumulator."""

from __future__ import annotations

from argparse import Namespace
from typing import TYPE_CHECKING, Any

from trainkit.loggers.base import Logger
from trainkit.loggers.experiment_writer import as_dict, update_hparams_file

if TYPE_CHECKING:
    from torch import nn


RUN_ROWS = "run/"  # the startup table's rows (RunSummary.as_hparams), shown beside the params


class TensorBoardLogger(Logger):
    """Write scalars and hyperparameters as TensorBoard events under ``log_dir``."""

    @property
    def view_command(self) -> str | None:
        return f"tensorboard --logdir {self.log_dir}"

    def __init__(
        self,
        save_dir: str | None = None,
        name: str | None = "trainkit_logs",
        version: int | str | None = None,
        log_graph: bool = False,
        default_hp_metric: bool = True,
        prefix: str = "",
        sub_dir: str | None = None,
        **kwargs: Any,
    ) -> None:
        """
        Args:
            save_dir: Folder the runs go under (default: the Trainer's default_root_dir).
            name: Experiment folder inside save_dir (None or '': runs directly in save_dir).
            version: Run folder: an int for version_N, a string as is (default: the next N).
            log_graph: Add the model's graph (needs ``example_input_array`` on the module).
            default_hp_metric: Log a placeholder ``hp_metric`` with the hyperparameters.
            prefix: Put before every metric name (``prefix-name``).
            sub_dir: A folder inside the run folder for this logger's events.
            kwargs: Passed to ``torch.utils.tensorboard.SummaryWriter``.
        """
        super().__init__(save_dir, name, version, prefix, sub_dir)
        self.log_graph_enabled = log_graph
        self.default_hp_metric = default_hp_metric
        self.writer_kwargs = kwargs
        self._writer: Any = None
        self.hparams: dict[str, Any] = {}  # every log_hyperparams call's, as Lightning's

    @property
    def experiment(self) -> Any:
        """The underlying ``SummaryWriter`` (created on first use)."""
        if self._writer is None:
            from torch.utils.tensorboard import SummaryWriter

            self._writer = SummaryWriter(log_dir=self.log_dir, **self.writer_kwargs)
        return self._writer

    def log_metrics(self, metrics: dict[str, float], step: int) -> None:
        writer = self.experiment
        for key, value in self.prefixed(metrics).items():
            writer.add_scalar(key, value, global_step=step)

    def log_hyperparams(self, params: dict[str, Any] | Namespace) -> None:
        """Record ``params`` in the events (TensorBoard's HPARAMS tab) and, as Lightning, keep
        them in ``hparams`` and ``log_dir/hparams.yaml`` (the startup table's ``run/`` rows go
        to the events only)."""
        from torch.utils.tensorboard.summary import hparams

        params = as_dict(params)
        given = {k: v for k, v in params.items() if not k.startswith(RUN_ROWS)}
        self.hparams.update(given)
        update_hparams_file(self.log_dir, self.hparams)
        flat = {
            k: v if isinstance(v, int | float | str | bool) else str(v) for k, v in params.items()
        }
        # Lightning's placeholder, with hyperparameters of the user's (not the table's alone)
        metrics = {"hp_metric": -1} if self.default_hp_metric and given else {}
        experiment, start, end = hparams(flat, metric_dict=metrics)
        writer = self.experiment.file_writer
        for summary in (experiment, start, end):
            writer.add_summary(summary)
        for key, value in metrics.items():
            self.experiment.add_scalar(key, value, 0)

    def log_graph(self, model: nn.Module, input_array: object = None) -> None:
        if not self.log_graph_enabled:
            return
        example = (
            input_array if input_array is not None else getattr(model, "example_input_array", None)
        )
        if example is None:
            raise ValueError(
                "TensorBoardLogger(log_graph=True) needs an example input; expected "
                "self.example_input_array = torch.randn(...) in the module's __init__"
            )
        self.experiment.add_graph(model, example)

    def save(self) -> None:
        if self._writer is not None:
            self._writer.flush()

    def finalize(self, status: str) -> None:
        if self._writer is not None:
            self._writer.flush()
            self._writer.close()
            self._writer = None
