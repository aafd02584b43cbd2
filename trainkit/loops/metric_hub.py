"""The Trainer's metric bookkeeping: stores for what ``self.log`` records, epoch aggregates,
what callbacks and the progress bar read, and what goes to the loggers."""

from __future__ import annotations

from typing import Any

import torch

from trainkit.metrics import MetricStore, to_float


class TrainerMetrics:
    """Mixed into Trainer; uses its strategy, loggers, state, epoch and step."""

    @property
    def callback_metrics(self) -> dict[str, torch.Tensor]:
        """Latest step values and epoch aggregates, by name; what monitors read."""
        metrics = dict(self._epoch_metrics)
        if self._train_store is not None:
            for name, value in self._train_store.step_values.items():
                metrics[self._train_store.meta[name].step_key(name)] = value
                metrics.setdefault(name, value)
        return metrics

    @property
    def progress_bar_metrics(self) -> dict[str, Any]:
        metrics = {key: self._epoch_metrics[key] for key in self._prog_bar_epoch_keys}
        if self._train_store is not None:
            metrics.update(self._train_store.step_metrics(for_prog_bar=True))
        return metrics

    def _new_store(self, stage: str) -> MetricStore:
        train = stage == "train"
        store = MetricStore(stage, default_on_step=train, default_on_epoch=not train)
        if self.strategy.is_distributed:
            store.reducer = self.strategy.reduce
        self._metric_store = store
        return store

    def _new_train_store(self) -> MetricStore:
        self._train_store = self._new_store("train")
        return self._train_store

    def _record_eval_metrics(
        self, store: MetricStore, results: list[dict[str, torch.Tensor]]
    ) -> None:
        merged: dict[str, torch.Tensor] = {}
        for result in results:
            merged.update(result)
        self._epoch_metrics.update(merged)
        self._note_prog_bar(store, merged)
        logged = {k: to_float(v) for k, v in merged.items() if store.meta[k].logger}
        if logged:
            if self.state == "fit":
                logged["epoch"] = self.current_epoch
            self.log_to_loggers(logged, self.global_step)

    def _note_prog_bar(self, store: MetricStore, values: dict[str, Any]) -> None:
        for name in values:
            meta = store.meta[name]
            if meta.prog_bar:
                self._prog_bar_epoch_keys[meta.epoch_key(name)] = None

    def _log_step_metrics(self, store: MetricStore) -> None:
        metrics = {k: to_float(v) for k, v in store.step_metrics(for_logger=True).items()}
        if metrics:
            metrics["epoch"] = self.current_epoch
            self.log_to_loggers(metrics, self.global_step)

    def _reduce_train_epoch(self, store: MetricStore) -> None:
        """Epoch aggregates of what training logged: into callback metrics and the loggers."""
        reduced = store.reduce_epoch()
        self._epoch_metrics.update(reduced)
        self._epoch_metrics.update(store.epoch_keys(reduced))
        self._note_prog_bar(store, reduced)
        logged = {k: to_float(v) for k, v in store.epoch_keys(reduced, for_logger=True).items()}
        if logged:
            logged["epoch"] = self.current_epoch
            self.log_to_loggers(logged, self.global_step)

    def log_to_loggers(self, metrics: dict[str, float], step: int) -> None:
        """Send floats to every logger (global rank 0 only)."""
        if self.is_global_zero:
            for logger in self.loggers:
                logger.log_metrics(metrics, step)
