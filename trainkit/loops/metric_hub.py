"""Metric bookkeeping for a run: the store ``self.log`` writes to, epoch aggregates, what
callbacks and the progress bar read, and what goes to the loggers."""

from __future__ import annotations

from typing import Any

import torch

from trainkit.metrics import MetricStore, to_float
from trainkit.state import RunState


class MetricHub:
    """Owns the metric stores of a run; the loops tell it when batches and epochs end."""

    def __init__(self, state: RunState) -> None:
        self.state = state
        self.active: MetricStore | None = None  # where ``self.log`` records right now
        self.train_store: MetricStore | None = None  # the current training epoch's store
        self.epoch_metrics: dict[str, torch.Tensor] = {}
        self.prog_bar_epoch_keys: dict[str, None] = {}
        self.logged: dict[str, float] = {}  # the latest values sent to the loggers
        self.eval_step_bar: dict[str, Any] = {}  # the step values evaluation logged for the bar
        # the loggers' step axis of evaluation steps: batches logged so far by stage and loader
        self.eval_batches_logged: dict[tuple[str, int], int] = {}
        # the training batch running (and its epoch's end) stepped: Lightning's loggers count
        # its step once it has ended, so its records go at the batches stepped before it
        self.stepped_in_batch = False

    def reset(self) -> None:
        """Forget every metric: each stage (fit, validate, test...) starts with none."""
        self.active = self.train_store = None
        self.epoch_metrics = {}
        self.prog_bar_epoch_keys = {}
        self.logged = {}
        self.eval_step_bar = {}
        self.eval_batches_logged = {}
        self.stepped_in_batch = False

    @property
    def callback_metrics(self) -> dict[str, torch.Tensor | float]:
        """Latest step values and epoch aggregates, by name; what monitors read. Epoch
        aggregates are tensors; a step value is a number where the step logged a number. As
        Lightning's: a name logged on_step and on_epoch holds the step's value during the
        epoch, the epoch's once it has ended."""
        metrics: dict[str, torch.Tensor | float] = dict(self.epoch_metrics)
        store = self.train_store
        if store is not None:
            for name, value in store.step_values.items():
                metrics[store.meta[name].step_key(name)] = value
                if store.epoch_reduced:
                    metrics.setdefault(name, value)
                else:
                    metrics[name] = value
            if store.epoch_end_reached and not store.epoch_reduced:  # the epoch-end hooks
                so_far = store.epoch_values_so_far()
                metrics.update(so_far)
                metrics.update(store.epoch_keys(so_far))
        return metrics

    @property
    def logged_metrics(self) -> dict[str, float]:
        """What went to the loggers, and, as Lightning's, the training step's values for them
        whether or not this step was one ``log_every_n_steps`` sends (read here, so a step
        costs no device sync)."""
        metrics = dict(self.logged)
        if self.train_store is not None:
            step = self.train_store.step_metrics(for_logger=True)
            metrics.update((key, to_float(value)) for key, value in step.items())
        return metrics

    @property
    def progress_bar_metrics(self) -> dict[str, Any]:
        metrics = dict(self.eval_step_bar)
        metrics.update((key, self.epoch_metrics[key]) for key in self.prog_bar_epoch_keys)
        if self.train_store is not None:
            metrics.update(self.train_store.step_metrics(for_prog_bar=True))
        return metrics

    def new_store(self, stage: str) -> MetricStore:
        """A fresh store for ``stage`` ('train', 'validation', 'test'), made the active one."""
        train = stage == "train"
        store = MetricStore(stage, default_on_step=train, default_on_epoch=not train)
        strategy = self.state.strategy
        if strategy.is_distributed:
            store.reducer = strategy.reduce
            store.warns_unsynced = strategy.is_global_zero
        self.active = store
        return store

    def new_train_store(self) -> MetricStore:
        self.train_store = self.new_store("train")
        return self.train_store

    def record_eval(self, store: MetricStore, results: list[dict[str, torch.Tensor]]) -> None:
        """An evaluation pass's reduced results: into callback metrics and the loggers."""
        merged: dict[str, torch.Tensor] = {}
        for result in results:
            merged.update(result)
        self.epoch_metrics.update(merged)
        self.epoch_metrics.update(store.epoch_keys(merged))  # 'm_epoch' of on_step and on_epoch
        self._note_prog_bar(store, merged)
        logged = {k: to_float(v) for k, v in store.epoch_keys(merged, for_logger=True).items()}
        if logged:
            self.log_to_loggers(logged, epoch=self.state.position.current_epoch)

    def log_eval_step(self, store: MetricStore, loader_idx: int, several: bool = False) -> None:
        """What an evaluation batch logged on_step: to the loggers (at the count of the batches
        of its loader before it, over the stage's evaluation runs) and the progress bar;
        monitors read only the epoch values."""
        where = (store.stage, loader_idx)
        step = self.eval_batches_logged.get(where, 0)
        self.eval_batches_logged[where] = step + 1
        loader = loader_idx if several else None  # named '/dataloader_idx_N' among several
        self.eval_step_bar.update(store.step_metrics(for_prog_bar=True, loader=loader))
        values = store.step_metrics(for_logger=True, loader=loader)
        logged = {k: to_float(v) for k, v in values.items()}
        store.step_values.clear()
        if logged:
            self.log_to_loggers(logged, step)

    def _note_prog_bar(self, store: MetricStore, values: dict[str, Any]) -> None:
        for name in values:
            meta = store.meta[name]
            if meta.prog_bar:
                self.prog_bar_epoch_keys[meta.epoch_key(name)] = None

    def log_step(self, store: MetricStore) -> None:
        """The step values of ``store`` to the loggers (every log_every_n_steps)."""
        metrics = {k: to_float(v) for k, v in store.step_metrics(for_logger=True).items()}
        if metrics:
            self.log_to_loggers(metrics, epoch=self.state.position.current_epoch)

    def reduce_train_epoch(self, store: MetricStore) -> None:
        """Epoch aggregates of what training logged: into callback metrics and the loggers."""
        step = store.step_metrics(for_logger=True)  # kept in logged_metrics past the epoch
        self.logged.update((key, to_float(value)) for key, value in step.items())
        reduced = store.reduce_epoch()
        self.epoch_metrics.update(reduced)
        self.epoch_metrics.update(store.epoch_keys(reduced))
        self._note_prog_bar(store, reduced)
        logged = {k: to_float(v) for k, v in store.epoch_keys(reduced, for_logger=True).items()}
        if logged:
            self.log_to_loggers(logged, epoch=self.state.position.current_epoch)

    def log_to_loggers(
        self,
        metrics: dict[str, float],
        step: int | None = None,
        epoch: int | None = None,
        record: bool = True,
    ) -> None:
        """Send floats to every logger (global rank 0 only), at ``step`` or the training batches
        stepped before the running one, Lightning's axis (the global step, unless a manually
        optimized module steps several optimizers per batch, minus the batch's own step while
        it and its epoch's end run); ``epoch`` goes to the loggers beside them, not into
        ``logged_metrics``; ``record=False``: not into ``logged_metrics`` either (a callback's
        own values, which Lightning's callbacks send to the loggers directly)."""
        state = self.state
        if record:
            self.logged.update(metrics)
        if epoch is not None:
            metrics = {**metrics, "epoch": epoch}
        if state.strategy.is_global_zero:
            if step is None:
                step = state.position.batches_stepped - self.stepped_in_batch
            for logger in state.given.loggers:
                logger.log_metrics(metrics, step)
