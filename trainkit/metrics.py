"""Where ``self.log`` values go: per-step latest values and on-device epoch aggregation."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeGuard

import torch
from torch import Tensor

from trainkit.errors import MisconfigurationError
from trainkit.utilities.data import extract_batch_size

REDUCE_FX = ("mean", "sum", "max", "min")
# Lightning's other spellings of them
REDUCE_CALLABLES: dict[object, str] = {
    torch.mean: "mean",
    "avg": "mean",
    torch.sum: "sum",
    sum: "sum",
    torch.max: "max",
    max: "max",
    torch.min: "min",
    min: "min",
}


@dataclass(frozen=True)
class MetricMeta:
    """How one logged name is treated; fixed by the first ``self.log`` call for that name."""

    on_step: bool
    on_epoch: bool
    prog_bar: bool
    logger: bool
    reduce_fx: str
    sync_dist: bool
    enable_graph: bool = False  # the step value keeps its graph
    add_dataloader_idx: bool = True  # '/dataloader_idx_N' after the name with several loaders

    def step_key(self, name: str) -> str:
        return f"{name}_step" if self.on_epoch else name

    def epoch_key(self, name: str) -> str:
        return f"{name}_epoch" if self.on_step else name


def batch_size_of(batch: object) -> int:
    """The size of the first dimension of the first tensor found in ``batch`` (1 if none)."""
    try:
        return extract_batch_size(batch)
    except MisconfigurationError:
        return 1


class MetricStore:
    """Collects what one stage (train, validate, test) logs; nothing is synced unless asked."""

    def __init__(self, stage: str, default_on_step: bool, default_on_epoch: bool) -> None:
        self.stage = stage
        self.default_on_step = default_on_step
        self.default_on_epoch = default_on_epoch
        self.meta: dict[str, MetricMeta] = {}
        self.step_values: dict[str, Tensor | float] = {}
        self._epoch_values: dict[str, list[tuple[Tensor | float, int]]] = {}
        self.batch: Any = None
        self._batch_size: int | None = None
        self.reducer: Callable[[Tensor, str], Tensor] | None = None
        self.metric_objects: dict[str, Any] = {}  # torchmetrics Metrics logged this epoch
        self._computed_metrics: list[Any] = []  # computed, reset after the epoch-end hooks

    def new_batch(self, batch: object) -> None:
        """Point the store at the batch being processed (its size is read only if needed)."""
        self.batch = batch
        self._batch_size = None

    def log(
        self,
        name: str,
        value: Tensor | float,
        prog_bar: bool,
        logger: bool,
        on_step: bool | None,
        on_epoch: bool | None,
        reduce_fx: str | Callable[..., Any],
        sync_dist: bool,
        batch_size: int | None,
        enable_graph: bool = False,
        add_dataloader_idx: bool = True,
        sync_dist_group: object = None,
    ) -> None:
        meta = self.meta.get(name)
        if meta is None:
            meta = self._register(
                name,
                MetricMeta(
                    on_step=self.default_on_step if on_step is None else on_step,
                    on_epoch=self.default_on_epoch if on_epoch is None else on_epoch,
                    prog_bar=prog_bar,
                    logger=logger,
                    reduce_fx=REDUCE_CALLABLES.get(reduce_fx, reduce_fx),  # type: ignore[arg-type]
                    sync_dist=sync_dist,
                    enable_graph=enable_graph,
                    add_dataloader_idx=add_dataloader_idx,
                ),
                sync_dist_group,
            )
        if isinstance(value, Tensor):  # the common case first: no extra call per step
            if value.ndim and value.numel() != 1:  # attributes first: a scalar costs no call
                _scalar(name, value)  # raises, naming the metric and its shape
            if not meta.enable_graph:
                value = value.detach()
            if meta.sync_dist and meta.on_step and self.reducer is not None:
                value = self.reducer(value.float(), meta.reduce_fx)
        elif is_metric_object(value):
            self._log_metric_object(name, value, meta)
            return
        elif not isinstance(value, int | float):
            raise TypeError(
                f"self.log({name!r}, ...) got {type(value).__name__}; expected a number or a "
                "scalar tensor; log each entry of a dict with self.log_dict"
            )
        if meta.on_step:
            self.step_values[name] = value
        if meta.on_epoch:
            if batch_size is None:
                batch_size = self._current_batch_size()
            self._epoch_values[name].append((value, batch_size))

    def _log_metric_object(self, name: str, metric: torch.nn.Module, meta: MetricMeta) -> None:
        """A torchmetrics Metric: its step value is what its forward returned for this batch;
        its epoch value is its own ``compute()`` (synced by the metric) at epoch end, then reset."""
        if meta.on_step:
            batch_value = metric._forward_cache  # noqa: SLF001 (forward()'s value is kept only here)
            if batch_value is None:
                raise ValueError(
                    f"self.log({name!r}, {type(metric).__name__}) on_step needs the metric's "
                    "value for this batch; expected metric(preds, target) in the step (not only "
                    "metric.update(...)); call it, or log with on_step=False"
                )
            self.step_values[name] = _scalar(name, batch_value)
        self.metric_objects[name] = metric

    def _register(self, name: str, meta: MetricMeta, sync_dist_group: object) -> MetricMeta:
        """The first ``self.log`` of ``name``: its options checked and kept."""
        if meta.reduce_fx not in REDUCE_FX:
            raise ValueError(
                f"self.log({name!r}, reduce_fx={meta.reduce_fx!r}); expected one of {REDUCE_FX} "
                "(or torch.mean, torch.sum, torch.max, torch.min)"
            )
        if meta.sync_dist and sync_dist_group is not None:
            raise ValueError(
                f"self.log({name!r}, sync_dist_group={sync_dist_group!r}); expected None: "
                "sync_dist reduces over every rank; gather over a group with self.all_gather"
            )
        self.meta[name] = meta
        if meta.on_epoch:
            self._epoch_values[name] = []
        return meta

    def _current_batch_size(self) -> int:
        if self._batch_size is None:
            self._batch_size = batch_size_of(self.batch)
        return self._batch_size

    def step_metrics(self, for_logger: bool = False, for_prog_bar: bool = False) -> dict[str, Any]:
        """Latest step values, keyed as the logger / progress bar show them."""
        out = {}
        for name, value in self.step_values.items():
            meta = self.meta[name]
            if (for_logger and not meta.logger) or (for_prog_bar and not meta.prog_bar):
                continue
            out[meta.step_key(name)] = value
        return out

    def reduce_epoch(self, reset_metric_objects: bool = True) -> dict[str, Tensor]:
        """Aggregate every on_epoch value (synced across ranks where asked) and reset. With
        ``reset_metric_objects=False`` the logged Metric objects keep their state until
        ``reset_computed_metrics()``: an epoch-end hook may still read them (``compute()``)."""
        out: dict[str, Tensor] = {}
        for name, entries in self._epoch_values.items():
            if not entries:
                continue
            meta = self.meta[name]
            out[name] = self._reduce_entries(entries, meta)
            entries.clear()
        for name, metric in self.metric_objects.items():
            if self.meta[name].on_epoch:
                out[name] = _scalar(name, metric.compute()).float()
            if reset_metric_objects:
                metric.reset()
            else:
                self._computed_metrics.append(metric)
        self.metric_objects.clear()
        return out

    def reset_computed_metrics(self) -> None:
        """Reset the Metric objects a ``reduce_epoch(reset_metric_objects=False)`` computed."""
        for metric in self._computed_metrics:
            metric.reset()
        self._computed_metrics.clear()

    def _reduce_entries(self, entries, meta: MetricMeta) -> Tensor:
        values = torch.stack([torch.as_tensor(v, dtype=torch.float64).cpu() for v, _ in entries])
        fx = meta.reduce_fx
        if fx == "mean":
            weights = torch.tensor([float(b) for _, b in entries], dtype=torch.float64)
            total = torch.stack([(values * weights).sum(), weights.sum()])
            if meta.sync_dist and self.reducer is not None:
                total = self.reducer(total, "sum")
            return (total[0] / total[1]).float()
        reduced = {"sum": values.sum, "max": values.max, "min": values.min}[fx]()
        if meta.sync_dist and self.reducer is not None:
            reduced = self.reducer(reduced, fx)
        return reduced.float()

    def partial_epoch_state(self) -> dict[str, Any]:
        """What was logged for the epoch so far (for a mid-epoch checkpoint): metas and entries."""
        state = {}
        for name, entries in self._epoch_values.items():
            values = [torch.as_tensor(v, dtype=torch.float64).cpu() for v, _ in entries]
            state[name] = {
                "meta": dict(vars(self.meta[name])),
                "values": torch.stack(values) if values else torch.zeros(0, dtype=torch.float64),
                "batch_sizes": [int(b) for _, b in entries],
            }
        return state

    def load_partial_epoch_state(self, state: dict[str, Any]) -> None:
        """Continue an epoch's aggregates from ``partial_epoch_state`` of a checkpoint."""
        for name, item in state.items():
            self.meta[name] = MetricMeta(**item["meta"])
            self._epoch_values[name] = list(zip(item["values"].unbind(), item["batch_sizes"]))

    def epoch_keys(
        self, values: dict[str, Tensor], for_logger: bool = False, for_prog_bar: bool = False
    ):
        """Rename reduced epoch values as the logger / progress bar show them."""
        out = {}
        for name, value in values.items():
            meta = self.meta[name]
            if (for_logger and not meta.logger) or (for_prog_bar and not meta.prog_bar):
                continue
            out[meta.epoch_key(name)] = value
        return out


def is_metric_object(value: object) -> TypeGuard[torch.nn.Module]:
    """Whether ``value`` is a torchmetrics ``Metric`` (or behaves as one): an nn.Module with
    update, compute and reset. Checked without importing torchmetrics."""
    return isinstance(value, torch.nn.Module) and all(
        callable(getattr(value, name, None)) for name in ("update", "compute", "reset")
    )


def _scalar(name: str, value: object) -> Tensor:
    value = torch.as_tensor(value).detach()
    if value.numel() != 1:
        raise ValueError(
            f"self.log({name!r}, ...) got a metric whose value has shape {tuple(value.shape)}; "
            "expected a single number; log each element, or reduce it first (value.mean(), or "
            "average='macro' for a torchmetrics metric)"
        )
    return value.reshape(())


def to_float(value: Tensor | float) -> float:
    """One number for a logger or the progress bar (this is where a device sync happens)."""
    return value.item() if isinstance(value, Tensor) else float(value)


def closest_key_hint(name: str, logged: Iterable[str]) -> str:
    """``"; did you mean 'val_loss'?"`` for a monitored name close to a logged one, else ""."""
    import difflib

    close = difflib.get_close_matches(name, list(logged), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""
