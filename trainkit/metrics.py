"""Where ``self.log`` values go: per-step latest values and on-device epoch aggregation."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, TypeGuard

import torch
from torch import Tensor

from trainkit.batch_size import extract_batch_size
from trainkit.errors import MisconfigurationError

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
        return _suffixed(name, "_step") if self.on_epoch else name

    def epoch_key(self, name: str) -> str:
        return _suffixed(name, "_epoch") if self.on_step else name


def _suffixed(name: str, suffix: str) -> str:
    """``name`` + ``suffix``, before a loader's ``/dataloader_idx_N`` as Lightning's
    (``acc_epoch/dataloader_idx_1``)."""
    base, found, index = name.rpartition("/dataloader_idx_")
    return f"{base}{suffix}/dataloader_idx_{index}" if found and index.isdigit() else name + suffix


class EpochAggregate:
    """One name's running reduction over an epoch, in Lightning's arithmetic: on the value's
    device, in float32 (float64 where the value is), a mean as the batch-size-weighted sum over
    the summed batch sizes; constant memory however long the epoch."""

    __slots__ = ("count", "reduce_fx", "total")

    def __init__(self, reduce_fx: str, total: Tensor | None = None, count: int = 0) -> None:
        self.reduce_fx = reduce_fx
        self.total = total
        self.count = count  # the batch sizes summed (a mean's denominator)

    def add(self, value: Tensor | float, batch_size: int) -> None:
        """Fold in one logged value (detached; an integer or half value counted as float32)."""
        if isinstance(value, Tensor):
            value = value.detach()
            if value.dtype not in (torch.float32, torch.float64):
                value = value.float()
        else:
            value = torch.tensor(value, dtype=torch.float32)
        fx, total = self.reduce_fx, self.total
        if fx == "mean":
            value = value * batch_size
            self.count += batch_size
        if total is None:
            self.total = value
        elif fx in ("mean", "sum"):
            self.total = total + value
        else:
            self.total = (torch.maximum if fx == "max" else torch.minimum)(total, value)

    def result(self, reducer: Callable[[Tensor, str], Tensor] | None) -> Tensor | None:
        """The epoch's value (reduced over the ranks by ``reducer`` if given), then empty."""
        total, count = self.total, self.count
        self.total, self.count = None, 0
        if total is None:
            return None
        if self.reduce_fx != "mean":
            return total if reducer is None else reducer(total, self.reduce_fx)
        if reducer is not None:  # the sums and the batch counts of every rank, one collective
            total, summed = reducer(torch.stack([total, total.new_tensor(count)]), "sum")
            return total / summed
        return total / count


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
        self._epoch: dict[str, EpochAggregate] = {}
        self.batch: Any = None
        self._batch_size: int | None = None
        self.reducer: Callable[[Tensor, str], Tensor] | None = None
        self.metric_objects: dict[str, Any] = {}  # torchmetrics Metrics logged this epoch
        self._computed_metrics: list[Any] = []  # computed, reset after the epoch-end hooks
        self.epoch_reduced = False  # reduce_epoch ran: the epoch's values are known
        # the epoch's batches are done: a read of the callback metrics before ``reduce_epoch``
        # (the epoch-end hooks) sees the epoch's values so far, as Lightning's
        self.epoch_end_reached = False
        # rank 0 of a distributed run: an epoch-level value without sync_dist is warned about
        self.warns_unsynced = False
        # the epoch's batches are done: a read of the callback metrics before ``reduce_epoch``
        # (the epoch-end hooks) sees the epoch's values so far, as Lightning's
        self.epoch_end_reached = False

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
        step_value = value
        if isinstance(value, Tensor):  # the common case first: no extra call per step
            if value.ndim and value.numel() != 1:  # attributes first: a scalar costs no call
                _scalar(name, value)  # raises, naming the metric and its shape
            if not meta.enable_graph:
                value = step_value = value.detach()
            if meta.sync_dist and meta.on_step and self.reducer is not None:
                step_value = self.reducer(value.float(), meta.reduce_fx)  # the epoch: unsynced
        elif is_metric_object(value):
            self._log_metric_object(name, value, meta)
            return
        elif not isinstance(value, int | float):
            raise TypeError(
                f"self.log({name!r}, ...) got {type(value).__name__}; expected a number or a "
                "scalar tensor; log each entry of a dict with self.log_dict"
            )
        if meta.on_step:
            self.step_values[name] = step_value
        if meta.on_epoch:
            if batch_size is None:
                batch_size = self._current_batch_size()
            self._epoch[name].add(value, batch_size)

    def _log_metric_object(self, name: str, metric: torch.nn.Module, meta: MetricMeta) -> None:
        """A torchmetrics Metric: its step value is what its forward returned for this batch;
        its epoch value is its own ``compute()`` (synced by the metric) at epoch end, then reset."""
        if meta.on_step:
            batch_value = metric._forward_cache  # noqa: SLF001 (forward()'s value is kept only here)
            if batch_value is not None:
                self.step_values[name] = _scalar(name, batch_value)
            else:  # only metric.update(...) ran: as Lightning, no step value (the epoch's stays)
                self.step_values.pop(name, None)
                warnings.warn(
                    f"self.log({name!r}, {type(metric).__name__}) on_step: the metric has no "
                    "value for this batch (only metric.update(...) ran), so no step value is "
                    "logged; call metric(preds, target) for one, or log with on_step=False",
                    stacklevel=4,
                )
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
            self._epoch[name] = EpochAggregate(meta.reduce_fx)
            if self.warns_unsynced and not meta.sync_dist:  # Lightning's words
                warnings.warn(
                    f"It is recommended to use `self.log({name!r}, ..., sync_dist=True)` when "
                    "logging on epoch level in distributed setting to accumulate the metric "
                    f"across devices (without it, {name} is rank 0's value alone)",
                    stacklevel=2,
                )
        return meta

    def _current_batch_size(self) -> int:
        if self._batch_size is None:
            self._batch_size = batch_size_of(self.batch)
        return self._batch_size

    def step_metrics(
        self, for_logger: bool = False, for_prog_bar: bool = False, loader: int | None = None
    ) -> dict[str, Any]:
        """Latest step values, keyed as the logger / progress bar show them (``loader``: the
        evaluation loader's ``/dataloader_idx_N`` added, one of several)."""
        out = {}
        for name, value in self.step_values.items():
            meta = self.meta[name]
            if (for_logger and not meta.logger) or (for_prog_bar and not meta.prog_bar):
                continue
            key = (
                name
                if loader is None or not meta.add_dataloader_idx
                else name + f"/dataloader_idx_{loader}"
            )
            out[meta.step_key(key)] = value
        return out

    def reduce_epoch(self, reset_metric_objects: bool = True) -> dict[str, Tensor]:
        """Aggregate every on_epoch value (synced across ranks where asked) and reset. With
        ``reset_metric_objects=False`` the logged Metric objects keep their state until
        ``reset_computed_metrics()``: an epoch-end hook may still read them (``compute()``)."""
        out: dict[str, Tensor] = {}
        self.epoch_reduced = True
        for name, aggregate in self._epoch.items():
            reduced = aggregate.result(self.reducer if self.meta[name].sync_dist else None)
            if reduced is not None:
                out[name] = reduced
        for name, metric in self.metric_objects.items():
            if self.meta[name].on_epoch:
                out[name] = _scalar(name, metric.compute()).float()
            if reset_metric_objects:
                metric.reset()
            else:
                self._computed_metrics.append(metric)
        self.metric_objects.clear()
        return out

    def epoch_values_so_far(self) -> dict[str, Tensor]:
        """What ``reduce_epoch`` would give now, without resetting anything."""
        out: dict[str, Tensor] = {}
        for name, aggregate in self._epoch.items():
            total, count = aggregate.total, aggregate.count
            reduced = aggregate.result(self.reducer if self.meta[name].sync_dist else None)
            aggregate.total, aggregate.count = total, count  # ``result`` empties it
            if reduced is not None:
                out[name] = reduced
        for name, metric in self.metric_objects.items():
            if self.meta[name].on_epoch:
                out[name] = _scalar(name, metric.compute()).float()
        return out

    def reset_computed_metrics(self) -> None:
        """Reset the Metric objects a ``reduce_epoch(reset_metric_objects=False)`` computed."""
        for metric in self._computed_metrics:
            metric.reset()
        self._computed_metrics.clear()

    def partial_epoch_state(self) -> dict[str, Any]:
        """What was logged for the epoch so far (for a mid-epoch checkpoint): each name's
        options and running total (on the CPU) and summed batch sizes."""
        return {
            name: {
                "meta": dict(vars(self.meta[name])),
                "total": None if aggregate.total is None else aggregate.total.cpu(),
                "count": aggregate.count,
            }
            for name, aggregate in self._epoch.items()
        }

    def load_partial_epoch_state(self, state: dict[str, Any]) -> None:
        """Continue an epoch's aggregates from ``partial_epoch_state`` of a checkpoint."""
        for name, item in state.items():
            meta = self.meta[name] = MetricMeta(**item["meta"])
            self._epoch[name] = EpochAggregate(meta.reduce_fx, item["total"], item["count"])

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
